package jail

import (
	"fmt"
	"strings"
)

// Markers around docs/jail.md's syscall table, which SyscallDoc writes
// and TestSyscallDocIsCurrent holds to the table.
const (
	SyscallDocBegin = "<!-- syscall table: generated from engine/jail/syscalls.go; WARDEN_UPDATE_DOCS=1 go test ./engine/jail -run TestSyscallDocIsCurrent rewrites it -->"
	SyscallDocEnd   = "<!-- end of the syscall table -->"
)

var actionDoc = map[action]string{
	allow:     "allow",
	deny:      "**EPERM**",
	nosys:     "ENOSYS",
	notsup:    "EOPNOTSUPP",
	check:     "checked",
	supervise: "supervised",
}

// SyscallDoc is the syscall table as markdown, between the markers.
func SyscallDoc() string {
	var b strings.Builder
	b.WriteString(SyscallDocBegin + "\n\n")
	b.WriteString("| syscall | x86_64 | arm64 | bwrap | landlock | why |\n| --- | --- | --- | --- | --- | --- |\n")
	num := func(n int) string {
		if n == noNr {
			return "–"
		}
		return fmt.Sprint(n)
	}
	for _, r := range syscallTable {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", r.name, num(r.amd64), num(r.arm64), actionDoc[r.bwrap], actionDoc[r.landlock], strings.ReplaceAll(r.why, "|", "\\|"))
	}
	b.WriteString("\n" + SyscallDocEnd)
	return b.String()
}
