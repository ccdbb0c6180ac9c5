package mcpconf

import (
	"testing"
)

// FuzzEditJSON: any bytes either refuse to parse, or get an entry that
// reads back exactly, and lose it again on removal; nothing panics.
func FuzzEditJSON(f *testing.F) {
	for _, s := range []string{existingJSON, "", "{}", `{"mcpServers":{}}`, `{"mcpServers":{"warden":{"command":"x"}}}`,
		`{"a":1,"mcpServers":{"b":{"command":"y","args":[]}},"c":[1,2]}`, "[1]", `{"mcpServers":[]}`, `{"x":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	e := entry("/usr/local/bin/warden")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []Client{Clients["claude-code"], Clients["cursor"]} {
			out, _, err := editJSON(c, data, "warden", &e)
			if err != nil {
				continue
			}
			got, err := findJSON(out, "warden")
			if err != nil || !sameEntry(got, &e) {
				t.Fatalf("entry reads back as %+v, %v\nin:  %q\nout: %q", got, err, data, out)
			}
			rm, _, err := editJSON(c, out, "warden", nil)
			if err != nil {
				t.Fatalf("removal failed: %v\n%q", err, out)
			}
			if got, err := findJSON(rm, "warden"); err != nil || got != nil {
				t.Fatalf("after removal: %+v %v\n%q", got, err, rm)
			}
		}
	})
}

// FuzzEditTOML: the same for Codex's TOML.
func FuzzEditTOML(f *testing.F) {
	for _, s := range []string{existingTOML, "", "a = 1\n", "[mcp_servers.warden]\ncommand = \"x\"\n[mcp_servers.warden.env]\nA = \"b\"\n",
		"mcp_servers = 1\n", "[mcp_servers]\nwarden = { command = \"x\" }\n", "x = \"\"\"\n[mcp_servers.warden]\n\"\"\"\n"} {
		f.Add([]byte(s))
	}
	e := entry("/usr/local/bin/warden")
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, err := editTOML(data, "warden", &e)
		if err != nil {
			return
		}
		got, err := findTOML(out, "warden")
		if err != nil || !sameEntry(got, &e) {
			t.Fatalf("entry reads back as %+v, %v\nin:  %q\nout: %q", got, err, data, out)
		}
		rm, _, err := editTOML(out, "warden", nil)
		if err != nil {
			t.Fatalf("removal failed: %v\n%q", err, out)
		}
		if got, err := findTOML(rm, "warden"); err != nil || got != nil {
			t.Fatalf("after removal: %+v %v\n%q", got, err, rm)
		}
	})
}
