// The kiln command reads large files through memory mappings (kiln pack's inputs, and full
// verification's archive: members are hashed where they lie). A file truncated underneath while
// it is read makes the next read of a page past its new end a SIGBUS, which would end the process
// as a crash. The command turns it into an I/O error instead: a message and exit code 4. Only the
// command installs this; libkiln never touches a process's signal handlers.
#pragma once

namespace kiln::cli {

// Installs the handler for SIGBUS raised by a read past the end of a mapped file (BUS_ADRERR).
// Any other SIGBUS (a hardware memory error) keeps its default action: the process dumps core.
void guard_against_truncated_mappings();

}  // namespace kiln::cli
