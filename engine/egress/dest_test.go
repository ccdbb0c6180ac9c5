package egress

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for in, want := range map[string]string{
		"api.github.com:443":     "api.github.com:443",
		"API.GitHub.com.:443":    "api.github.com:443",
		"*.pythonhosted.org:443": "*.pythonhosted.org:443",
		"pypi.org":               "pypi.org",
		"ip:203.0.113.7:443":     "ip:203.0.113.7:443",
		"ip:[2001:db8::7]:8443":  "ip:[2001:db8::7]:8443",
		"localhost:8080":         "localhost:8080",
	} {
		d, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if d.String() != want {
			t.Errorf("Parse(%q) = %q, want %q", in, d.String(), want)
		}
		again, err := Parse(d.String())
		if err != nil || again.String() != d.String() {
			t.Errorf("canonical %q does not read back: %v", d.String(), err)
		}
	}
	if d, _ := Parse("pypi.org"); len(d.Ports) != 2 || d.Ports[0] != 443 || d.Ports[1] != 80 {
		t.Errorf("a name without a port allows %v, want [443 80]", d.Ports)
	}
}

func TestParseRefuses(t *testing.T) {
	for in, why := range map[string]string{
		"":                               "empty",
		"*":                              "bare *",
		"*:443":                          "bare *",
		"*.com:443":                      "single label",
		"a.*.example.com":                "whole leading label",
		"**.example.com":                 "whole leading label",
		"203.0.113.7:443":                "ip:",
		"203.0.113.7":                    "ip:",
		"127.1":                          "ip:",
		"0x7f.1":                         "ip:",
		"[::1]:443":                      "ip:",
		"::1":                            "ip:",
		"10.0.0.0/8":                     "CIDR",
		"ip:10.0.0.0/8:443":              "CIDR",
		"ip:203.0.113.7":                 "needs a port",
		"ip:2001:db8::7:443":             "brackets",
		"ip:0.0.0.0:443":                 "cannot be a destination",
		"ip:example.com:443":             "not an IP",
		"example.com:0":                  "1 to 65535",
		"example.com:65536":              "1 to 65535",
		"example.com:":                   "empty port",
		"example.com:*":                  "port wildcard",
		"example.com:044":                "1 to 65535",
		"exa mple.com":                   "space",
		"exämple.com":                    "non-ASCII",
		"-bad.example.com":               "hyphen",
		"a..b":                           "empty label",
		"a_b!.com":                       "character",
		strings.Repeat("a", 64) + ".com": "label longer",
	} {
		_, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) accepted; want a refusal (%s)", in, why)
			continue
		}
		if !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q) = %v; want it to say %q", in, err, why)
		}
	}
}

func TestParseListNamesEntryAndRefusesDuplicates(t *testing.T) {
	_, err := ParseList([]string{"pypi.org", "*", "x.org"})
	if err == nil || !strings.HasPrefix(err.Error(), "entry 1:") {
		t.Errorf("err = %v, want entry 1", err)
	}
	_, err = ParseList([]string{"pypi.org:443", "PYPI.org:443"})
	if err == nil || !strings.Contains(err.Error(), "repeats entry 0") {
		t.Errorf("duplicate: err = %v", err)
	}
}

func TestMatch(t *testing.T) {
	l, err := ParseList([]string{"api.github.com:443", "*.pythonhosted.org:443", "pypi.org", "ip:203.0.113.7:8443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		port uint16
		ok   bool
	}{
		{"api.github.com", 443, true},
		{"API.GITHUB.COM.", 443, true},
		{"api.github.com", 80, false},
		{"github.com", 443, false},
		{"evilapi.github.com", 443, false},
		{"files.pythonhosted.org", 443, true},
		{"a.b.pythonhosted.org", 443, true},
		{"pythonhosted.org", 443, false},
		{"xpythonhosted.org", 443, false},
		{"pypi.org", 443, true},
		{"pypi.org", 80, true},
		{"pypi.org", 8080, false},
		{"203.0.113.7", 8443, true},
		{"::ffff:203.0.113.7", 8443, true},
		{"203.0.113.7", 443, false},
		{"203.0.113.8", 8443, false},
		{"bad name", 443, false},
	} {
		_, ok := l.Match(c.host, c.port)
		if ok != c.ok {
			t.Errorf("Match(%q, %d) = %v, want %v", c.host, c.port, ok, c.ok)
		}
	}
}

// FuzzParse: any input is refused cleanly or parsed into a Dest whose
// canonical spelling reads back to itself; a parsed entry never allows
// everything.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"api.github.com:443", "*.pythonhosted.org:443", "pypi.org", "ip:203.0.113.7:443", "ip:[::1]:1", "*", "10.0.0.0/8", "a.b:65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(d.String())
		if err != nil || again.String() != d.String() {
			t.Fatalf("Parse(%q) = %q, which reads back as %q (%v)", s, d.String(), again.String(), err)
		}
		if !d.Addr.IsValid() && (d.Host == "" || strings.Contains(d.Host, "*")) {
			t.Fatalf("Parse(%q) allows a name pattern %q", s, d.Host)
		}
		if len(d.Ports) == 0 {
			t.Fatalf("Parse(%q) allows no port", s)
		}
	})
}

// The fix a refusal of a numeric host offers is an entry Parse takes,
// naming the address the C library would connect to: for 127.1:443,
// ip:127.0.0.1:443, not ip:127.1:443, which Parse refuses too.
func TestIPLiteralHintParses(t *testing.T) {
	for in, want := range map[string]string{
		"127.1:443":       "ip:127.0.0.1:443",
		"0x7f.1:80":       "ip:127.0.0.1:80",
		"010.0.0.1:22":    "ip:8.0.0.1:22",
		"2130706433:443":  "ip:127.0.0.1:443",
		"203.0.113.7:443": "ip:203.0.113.7:443",
		"127.1":           "ip:127.0.0.1:PORT",
		"1.2.3.4.5:443":   "ip:A.B.C.D:443",
		"1.256.1:443":     "ip:A.B.C.D:443",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), "write "+want+" if") {
			t.Errorf("Parse(%q): %v; want the hint %s", in, err, want)
			continue
		}
		if !strings.Contains(want, "PORT") && !strings.Contains(want, "A.B.C.D") {
			if _, err := Parse(want); err != nil {
				t.Errorf("the hint %s for %q is refused: %v", want, in, err)
			}
		}
	}
}
