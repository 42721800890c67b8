#ifndef SSHKIT_BUILD_H
#define SSHKIT_BUILD_H

/**
 * @brief The release of this checkout: what `--version` prints and what
 * scripts/install.sh and scripts/package-deb.sh name their packages after.
 */
#define SSHKIT_VERSION "0.9.0"

/**
 * @brief "<version> (<commit>)": the release and the commit the tools were built
 * from. scripts/install.sh passes the commit (-Xcc -DSSHKIT_BUILD_COMMIT="..."); a
 * plain `swift build` says "a checkout" instead.
 * @return a static string.
 */
const char *_Nonnull sshkit_build_version_line(void);

#endif
