// What a program reports about its own build: the version from project() and the git revision
// it was built from, taken when it was built (cmake/write_revision.cmake), "-dirty" when the tree
// had uncommitted changes, "unknown" outside a checkout unless -DIDEMWATCH_REVISION= says.
#pragma once

namespace idem {

inline constexpr const char* kVersion = IDEMWATCH_VERSION;
const char* buildRevision();

}  // namespace idem
