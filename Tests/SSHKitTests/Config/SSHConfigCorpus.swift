/// Configurations for the `ssh -G` conformance test: each is a set of files (the first
/// is passed with `-F`; `@DIR@` is the directory they are written to) and the host
/// names to resolve with it.
struct SSHConfigCase: Sendable, CustomStringConvertible {
    let name: String
    let files: [(String, String)]
    let hosts: [String]
    var environment: [String: String] = [:]
    var description: String { name }
}

enum SSHConfigCorpus {
    static let commonHosts = ["prod-db", "PROD-DB", "web1.example.com", "db.internal", "bastion", "10.0.0.5", "127.1",
                              "x", "foo.bar", "jump2", "Mixed.Case.Example"]

    static let cases: [SSHConfigCase] = [
        SSHConfigCase(name: "host patterns, first value wins, negation", files: [("main.conf", """
            # a comment
            Host prod-db PROD-DB
                HostName db1.internal.%h.example
                User deploy
                Port 2222
            Host *.example.com !web2.example.com
                User web
                Port 2200
            Host db.* foo.???
                User dbadmin
                IdentitiesOnly yes
            Host !bastion *
                Port 2022
                User everyone
            Host *
                User last
                Port 9999
            """)], hosts: commonHosts),

        SSHConfigCase(name: "keyword forms: case, =, quotes, trailing comments", files: [("main.conf", """
            HOST "prod-db"
              user=alice
              PORT = 2201
              IdentityFile "/tmp/with space/key"   # trailing comment
              IdentityFile '/tmp/single quoted'
              IdentityFile /tmp/escaped\\ space
              SendEnv LANG "LC_*" X#notacomment
            Host *
              user= bob
              identityfile ~/.ssh/id_other
              SetEnv A=1 "B=two words" A=3
              SetEnv C=ignored
            """)], hosts: ["prod-db", "other"]),

        SSHConfigCase(name: "Include chains, globs in byte order, blocks continue into includes", files: [
            ("main.conf", """
            Include @DIR@/inc/top.conf
            Host prod-*
                Include @DIR@/inc/d/*.conf
            Host never-matches
                Include @DIR@/inc/inactive.conf
            Host *
                User fallback
                Include @DIR@/inc/nothing-matches-*.conf
            """),
            ("inc/top.conf", """
            Host bastion
                HostName bastion.example.net
                Port 2022
            """),
            ("inc/d/b.conf", """
            User from-b
            IdentityFile ~/.ssh/b_key
            Host *
                Port 1111
            """),
            ("inc/d/a.conf", """
            User from-a
            IdentityFile ~/.ssh/a_key
            """),
            ("inc/d/B.conf", """
            IdentityFile ~/.ssh/upper_B_key
            """),
            ("inc/inactive.conf", """
            User never
            Host *
                Port 4444
            """),
        ], hosts: ["prod-db", "prod-web", "bastion", "dev"]),

        SSHConfigCase(name: "Match: host, originalhost, user, localuser, all, negation, final, canonical", files: [("main.conf", """
            Host alias1
                HostName real1.example.com
            Match originalhost alias1
                Port 2001
            Match host real1.example.com,!*.other
                User matched-host
            Match host *.EXAMPLE.com user matched-host
                IdentityFile ~/.ssh/after_user
            Match !host prod-*
                ServerAliveInterval 15
            Match localuser root,nobody
                ServerAliveCountMax 7
            Match user nobody
                Port 1
            Match canonical
                ConnectTimeout 33
            Match final host real1.example.com
                SetEnv FINAL=yes
            Match !final
                SendEnv NOTFINAL
            Match all
                User everybody
                SendEnv ALWAYS
            """)], hosts: ["alias1", "prod-db", "web1.example.com", "x"]),

        SSHConfigCase(name: "tokens and environment variables", files: [("main.conf", """
            Host *
                HostName %h.tokens.example
                User tokuser
                Port 2345
                ControlPath ~/.ssh/cm-%C-%h-%p-%r-%u-%n-%l-%L-%i-%%-%k
                UserKnownHostsFile ~/kh/%h_%p ${SSHKIT_TEST_DIR}/known_%r %d/third
                IdentityAgent ${SSHKIT_TEST_DIR}/agent.%u
                IdentityFile ~/.ssh/id_%h_%r
                CertificateFile ~/.ssh/cert_%h-cert.pub
                HostKeyAlias Alias-%h
                ProxyCommand nc %h %p # kept as written
            """)], hosts: ["prod-db", "Mixed.Case"], environment: ["SSHKIT_TEST_DIR": "/tmp/sshkit-test-dir"]),

        SSHConfigCase(name: "algorithm lists with +, - and ^", files: [("main.conf", """
            Host plus
                Ciphers +aes128-cbc,3des-cbc
                MACs +hmac-md5
                KexAlgorithms +diffie-hellman-group14-sha1
                HostKeyAlgorithms +ssh-rsa
                PubkeyAcceptedAlgorithms +ssh-rsa,ssh-dss
            Host minus
                Ciphers -aes*-ctr
                MACs -*etm*
                KexAlgorithms -sntrup*,ecdh-*
                HostKeyAlgorithms -*cert*
                PubkeyAcceptedAlgorithms -sk-*
            Host caret
                Ciphers ^aes256-gcm@openssh.com
                KexAlgorithms ^curve25519-sha256
                HostKeyAlgorithms ^ssh-ed25519
            Host explicit
                Ciphers aes256-ctr,aes128-ctr,aes256-ctr
                MACs hmac-sha2-512,hmac-sha2-256
                KexAlgorithms curve25519-sha256,ecdh-sha2-nistp521
                HostKeyAlgorithms ssh-rsa*,ssh-ed25519
                PubkeyAcceptedAlgorithms *cert*
            """)], hosts: ["plus", "minus", "caret", "explicit", "other"]),

        SSHConfigCase(name: "ProxyJump chains and ProxyCommand", files: [("main.conf", """
            Host one
                ProxyJump bastion
            Host chain
                ProxyJump alice@j1:2200,ssh://bob@j2:2201,j3
            Host v6
                ProxyJump [::1]:2222
            Host numeric
                ProxyJump 10.1.2.3:22
            Host none-then-command
                ProxyJump none
                ProxyCommand nc %h %p
            Host command-first
                ProxyCommand ssh -W %h:%p gateway
                ProxyJump ignored
            Host cut
                ProxyJump j1 j2
            Host *
                ProxyJump default-jump
            """)], hosts: ["one", "chain", "v6", "numeric", "none-then-command", "command-first", "cut", "other"]),

        SSHConfigCase(name: "forwards, agent, TTY, control, known hosts, timeouts", files: [("main.conf", """
            Host fw
                LocalForward 8080 localhost:80
                LocalForward 127.0.0.1:8081 [::1]:81
                LocalForward 8082 /tmp/remote.sock
                LocalForward /tmp/local.sock db:5432
                RemoteForward 9090 localhost:90
                RemoteForward 9091
                RemoteForward [::1]:9092 web:http
                DynamicForward 1080
                DynamicForward 127.0.0.1:1081
                LocalForward 8080 localhost:80
                ForwardAgent yes
                RequestTTY force
                ControlMaster auto
                ControlPath /tmp/cm-%r@%h:%p
                ControlPersist 10m
                StrictHostKeyChecking accept-new
                HashKnownHosts yes
                ConnectTimeout none
                ConnectTimeout 1m30s
                ServerAliveInterval 20
                ServerAliveCountMax 5
                UserKnownHostsFile none
                GlobalKnownHostsFile /etc/a /etc/b
            Host batch
                BatchMode yes
                StrictHostKeyChecking no
                RequestTTY no
                ControlMaster no
                ControlPersist yes
                ForwardAgent /tmp/agent.sock
                ClearAllForwardings yes
                LocalForward 7000 h:7
            Host strict
                StrictHostKeyChecking yes
                ControlMaster ask
                ControlPersist 0
                RequestTTY yes
                IdentitiesOnly yes
                IdentityAgent none
                SendEnv A B C -B
            """)], hosts: ["fw", "batch", "strict", "other"]),

        SSHConfigCase(name: "IgnoreUnknown, deprecated and unsupported keywords, aliases", files: [("main.conf", """
            IgnoreUnknown UseKeychain,AddKeys*
            UseKeychain yes
            AddKeysSomething no
            Protocol 2
            RSAAuthentication no
            PubkeyAcceptedKeyTypes +ssh-rsa
            Host *
                IdentityFile2 ~/.ssh/legacy
                ForwardX11 no
                Compression yes
            """)], hosts: ["any"]),

        SSHConfigCase(name: "Match exec with tokens", files: [("main.conf", """
            Match exec "test %h = exec-yes"
                User exec-matched
            Match exec "test %n = nothing" host exec-*
                Port 2999
            Match host exec-* exec "exit 1"
                Port 3999
            Host *
                User plain
            """)], hosts: ["exec-yes", "exec-no"]),
    ]

    /// Configurations `ssh -G` refuses: each must be a typed error here, on the same line.
    static let refused: [(name: String, config: String, line: Int)] = [
        ("a bad port", "Host *\n  Port 0\n", 2),
        ("a port that is not a number", "Port twenty\n", 1),
        ("an unknown keyword", "Host x\nFrobnicate yes\n", 2),
        ("an unknown keyword in a block that does not match", "Host nothing\n  NoSuchThing 1\n", 2),
        ("a keyword without its value", "User\n", 1),
        ("an unclosed quote", "User \"alice\n", 1),
        ("extra arguments", "User alice bob\n", 1),
        ("an unknown cipher", "Ciphers aes999-ctr\n", 1),
        ("a cipher pattern", "Ciphers aes*\n", 1),
        ("an unknown key type", "HostKeyAlgorithms ssh-foo\n", 1),
        ("a bad time", "ConnectTimeout soon\n", 1),
        ("a bad yes/no", "BatchMode maybe\n", 1),
        ("a Match without criteria", "Match\n", 1),
        ("an unsupported Match attribute", "Match tagged x\n", 1),
        ("a Match criterion without its argument", "Match host\n", 1),
        ("Match all with others", "Match host a user b all\n", 1),
        ("a bad forward", "LocalForward 8080\n", 1),
        ("a bad forward target", "LocalForward 8080 host:0\n", 1),
        ("a bad ProxyJump", "ProxyJump a,,b\n", 1),
        ("none with other known hosts files", "UserKnownHostsFile none /tmp/x\n", 1),
        ("an environment name with =", "SendEnv A=B\n", 1),
        ("a SetEnv without =", "SetEnv ABC\n", 1),
        ("a bad ControlPersist", "ControlPersist YES\n", 1),
        ("a bad StrictHostKeyChecking", "StrictHostKeyChecking sometimes\n", 1),
    ]
}
