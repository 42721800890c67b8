import Testing
@Test func probe() {}
