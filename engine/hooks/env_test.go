package hooks

import (
	"slices"
	"strings"
	"testing"
)

func TestBuildEnv(t *testing.T) {
	t.Parallel()
	parent := []string{
		"PATH=/usr/bin:/opt/warden/bin:/bin",
		"HOME=/root",
		"TERM=xterm",
		"TZ=", // set, even if empty: passes
		"FOO_SECRET=hunter2",
		"AWS_SECRET_ACCESS_KEY=x",
		"WARDEN_FROM_OPERATOR=1", // WARDEN_* is the engine's to set, not the operator's
		"http_proxy=http://proxy:3128",
		"HTTP_PROXY=http://other:3128", // only the lower-case names are listed
		"noequals",
	}
	extra := map[string]string{
		"WARDEN_RUN_ID": "r1",
		"WARDEN_SOCKET": "/run/warden.sock",
		"OTHER":         "dropped",
		"WARDEN_":       "dropped",
		"WARDEN_BAD":    "nul\x00byte",
	}
	got := BuildEnv(parent, extra, "/opt/warden/bin")
	want := []string{
		"HOME=/root",
		"PATH=/opt/warden/bin:/usr/bin:/bin",
		"TERM=xterm",
		"TZ=",
		"WARDEN_RUN_ID=r1",
		"WARDEN_SOCKET=/run/warden.sock",
		"http_proxy=http://proxy:3128",
	}
	if !slices.Equal(got, want) {
		t.Errorf("BuildEnv =\n  %q\nwant\n  %q", got, want)
	}
}

func TestBuildEnvPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		parent    []string
		pathFirst string
		want      string
	}{
		{nil, "/w/bin", "/w/bin:/usr/local/bin:/usr/bin:/bin"},
		{[]string{"PATH="}, "/w/bin", "/w/bin:/usr/local/bin:/usr/bin:/bin"},
		{[]string{"PATH=/w/bin/:/bin::/w/bin:/usr/bin:."}, "/w/bin", "/w/bin:/bin:/usr/bin:."},
		{[]string{"PATH=/a", "PATH=/b"}, "/w", "/w:/b"}, // last wins, as for getenv
		{[]string{"PATH=/bin"}, "", "/bin"},
	}
	for _, c := range cases {
		env := BuildEnv(c.parent, nil, c.pathFirst)
		if !slices.Contains(env, "PATH="+c.want) {
			t.Errorf("BuildEnv(%q, %q) = %q, want PATH=%s", c.parent, c.pathFirst, env, c.want)
		}
	}
}

func TestBuildEnvReachesChild(t *testing.T) {
	t.Parallel()
	parent := []string{"PATH=/usr/bin:/bin", "HOME=/root", "FOO_SECRET=hunter2"}
	env := BuildEnv(parent, map[string]string{"WARDEN_RUN_ID": "r9"}, "/opt/warden/bin")
	c := &execSink{}
	p, err := Start(DirectSpawner{}, Spawn{Argv: []string{"/usr/bin/env"}, Env: env}, Limits{}, c.sink)
	if err != nil {
		t.Fatal(err)
	}
	if ex := p.Wait(); ex.Code != 0 {
		t.Fatalf("exit = %+v", ex)
	}
	out := c.texts(false)
	for _, kv := range out {
		if strings.Contains(kv, "hunter2") {
			t.Errorf("secret reached the child: %q", kv)
		}
	}
	if !slices.Contains(out, "WARDEN_RUN_ID=r9") {
		t.Errorf("WARDEN_RUN_ID missing from %q", out)
	}
	if !slices.Contains(out, "PATH=/opt/warden/bin:/usr/bin:/bin") {
		t.Errorf("PATH wrong in %q", out)
	}
}

// TestBuildEnvDropsProxyCredentials: the operator's proxy password never
// reaches a hook; the proxy itself still does.
func TestBuildEnvDropsProxyCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"http://alice:s3cret@proxy:3128", "http://proxy:3128"},
		{"http://alice@proxy:3128/", "http://proxy:3128/"},
		{"alice:s3cret@proxy:3128", "http://proxy:3128"},
		{"proxy:3128", "proxy:3128"},
		{"http://proxy:3128", "http://proxy:3128"},
		{"http://al%zzce:s3cret@proxy", ""}, // unparsable: dropped whole
		{"", ""},
	} {
		got := BuildEnv([]string{"https_proxy=" + c.in, "no_proxy=alice:s3cret@x"}, nil, "")
		want := []string{"PATH=" + defaultPath, "no_proxy=alice:s3cret@x"}
		if c.want != "" || c.in == "" {
			want = append(want, "https_proxy="+c.want)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("https_proxy=%s: BuildEnv = %q, want %q", c.in, got, want)
		}
		if strings.Contains(strings.Join(got, " "), "s3cret@proxy") {
			t.Errorf("https_proxy=%s: the password reached the hook: %q", c.in, got)
		}
	}
}
