// Package mcpconf prepares MCP clients' configuration files: it adds,
// updates or removes warden's entry in another program's config under
// the rules for files warden does not own (docs/operating.md, "MCP
// clients"). The target must be absolute and canonical, the user's, a
// regular file with one link opened without following symlinks, at most
// 1 MiB, not group/world writable, under ancestors that are not
// group/world writable; it is parsed strictly and edited in place, so
// every other byte stays as it was; the new file is written to a temp
// file in the same dir (O_EXCL, 0600), fsynced and renamed over the
// original only if the original's device, inode, size and mtime have not
// changed since it was read; the original is kept as <file>.bak. A
// refusal names the check and the fix, and changes nothing.
//
// It imports no warden package.
package mcpconf

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"sync"
)

// Client is an MCP client warden can prepare.
type Client struct {
	Name string
	// TOML is true for a TOML config (Codex); the others are JSON with a
	// top-level "mcpServers" object.
	TOML bool
	// Type, when set, is written as the entry's "type" (Claude Code wants
	// "stdio").
	Type string
	// Where is where the client reads its MCP servers from, relative to
	// the home dir (see DefaultPath).
	Where string
	// ApprovalMode, when set, is written as the entry's
	// default_tools_approval_mode (Codex). warden gates every tool call
	// itself (the client's policy or an operator's decision), so the
	// client need not ask its user too: with "approve", `codex exec`
	// (approval_policy never) calls warden's tools instead of refusing
	// each, and an interactive Codex does not ask twice for one call.
	ApprovalMode string
}

// ApprovalWhy is what install says about ApprovalMode.
const ApprovalWhy = "warden asks its operator (or the client's policy allows) before every tool call runs, so the client need not ask too: without it `codex exec` (approval_policy never) refuses every call, and an interactive Codex asks its user before warden asks the operator"

// Clients are the clients `warden mcp install` knows, by name.
//
//   - claude-code: ~/.claude.json, top-level "mcpServers" (user scope),
//     entries {"type": "stdio", "command", "args"}.
//   - claude-desktop: ~/.config/Claude/claude_desktop_config.json on Linux
//     (~/Library/Application Support/Claude/ on macOS), "mcpServers",
//     entries {"command", "args"}.
//   - cursor: ~/.cursor/mcp.json (global), "mcpServers", entries
//     {"command", "args"}.
//   - codex: $CODEX_HOME/config.toml (default ~/.codex/config.toml), a
//     [mcp_servers.<name>] table with command, args and
//     default_tools_approval_mode = "approve" (see ApprovalMode).
var Clients = map[string]Client{
	"claude-code":    {Name: "claude-code", Type: "stdio", Where: ".claude.json"},
	"claude-desktop": {Name: "claude-desktop", Where: desktopPath()},
	"cursor":         {Name: "cursor", Where: ".cursor/mcp.json"},
	"codex":          {Name: "codex", TOML: true, Where: ".codex/config.toml", ApprovalMode: "approve"},
}

func desktopPath() string {
	if runtime.GOOS == "darwin" {
		return "Library/Application Support/Claude/claude_desktop_config.json"
	}
	return ".config/Claude/claude_desktop_config.json"
}

// ClientNames lists the known clients, sorted.
func ClientNames() []string {
	names := make([]string, 0, len(Clients))
	for n := range Clients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup finds a client by name.
func Lookup(name string) (Client, error) {
	c, ok := Clients[name]
	if !ok {
		return Client{}, fmt.Errorf("unknown MCP client %q (known: %v)", name, ClientNames())
	}
	return c, nil
}

// DefaultPath is the config file the client reads by default: under
// $HOME, except Codex under $CODEX_HOME when set.
func (c Client) DefaultPath() (string, error) {
	if c.Name == "codex" {
		if ch := os.Getenv("CODEX_HOME"); ch != "" {
			return filepath.Join(ch, "config.toml"), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home dir to find %s's config in (%v): give --config PATH", c.Name, err)
	}
	return filepath.Join(home, c.Where), nil
}

// Entry is warden's server entry: the command the client starts and its
// arguments.
type Entry struct {
	Command string   `json:"command" toml:"command"`
	Args    []string `json:"args" toml:"args"`
	// ApprovalMode is Codex's default_tools_approval_mode ("" for the
	// other clients, whose JSON entries have no such key).
	ApprovalMode string `json:"approvalMode,omitempty" toml:"default_tools_approval_mode,omitempty"`
}

// Compiled on first use, not at init (each CLI verb paid for it at start).
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// CheckName refuses a server name that is not [A-Za-z0-9_-]{1,64} (a
// bare TOML key, and a plain JSON key).
func CheckName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("server name %q: use 1 to 64 of A-Z a-z 0-9 _ -", name)
	}
	return nil
}
