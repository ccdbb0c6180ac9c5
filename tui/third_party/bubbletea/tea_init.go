package tea

// Upstream's init here called lipgloss.HasDarkBackground(), so that
// termenv queried the terminal (OSC 11, then a cursor position report)
// before a Program took it. That ran in every process that links Bubble
// Tea: every warden verb, not only the console, wrote the queries to its
// terminal and, where nothing answers (under script, a serial console),
// waited termenv's 5 s timeout for the answer. warden's console asks
// lipgloss itself, once it knows it runs a Program in the foreground of a
// terminal (cmd/warden/console.go). See PATCHED.md.
