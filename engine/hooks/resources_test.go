package hooks

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseManifestLimits(t *testing.T) {
	src := mfOKHead + `hooks:
  big:
    run: [x]
    kill_grace: 5s
    limits:
      memory: 1GiB
      pids: 512
      cpu: 0.5
      tmp: 128MiB
      run_dir: 8MiB
  some:
    run: [x]
    limits: {memory: 256MiB}
  none: {run: [x]}
`
	m, err := ParseManifest(mfTestFile, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	big := m.Hooks["big"]
	want := Resources{Memory: 1 << 30, Pids: 512, CPU: 0.5, Tmp: 128 << 20, RunDir: 8 << 20}
	if big.Limits != want || big.KillGrace != 5*time.Second {
		t.Errorf("big: limits %+v grace %s, want %+v 5s", big.Limits, big.KillGrace, want)
	}
	if big.LimitLines["memory"] != 8 || big.LimitLines["run_dir"] != 12 {
		t.Errorf("lines = %v", big.LimitLines)
	}
	// Undeclared limits are the defaults; a declared one stays.
	if got := m.Hooks["some"].Effective(DefaultCeiling); got != (Resources{Memory: 256 << 20, Pids: 256, CPU: 1, Tmp: 64 << 20, RunDir: 16 << 20}) {
		t.Errorf("some effective = %+v", got)
	}
	if got := m.Hooks["none"].Effective(DefaultCeiling); got != DefaultResources {
		t.Errorf("none effective = %+v, want the defaults %+v", got, DefaultResources)
	}
	if m.Hooks["none"].KillGrace != DefaultKillGrace {
		t.Errorf("default grace = %s", m.Hooks["none"].KillGrace)
	}
	// An operator ceiling below a default lowers the default.
	low := Resources{Memory: 128 << 20, Pids: 64, CPU: 0.5, Tmp: 8 << 20, RunDir: 4 << 20}
	if got := m.Hooks["none"].Effective(low); got != low {
		t.Errorf("effective under a low ceiling = %+v, want %+v", got, low)
	}
}

func TestParseManifestLimitRefusals(t *testing.T) {
	hook := func(body string) string { return mfOKHead + "hooks:\n  h:\n    run: [x]\n" + body }
	tests := []struct {
		name, src string
		line      int
		key, prob string
	}{
		{"unknown limit", hook("    limits: {memory: 1GiB, disk: 1GiB}\n"), 6, "hooks.h.limits.disk", "unknown key (known: memory, pids, cpu, tmp, run_dir)"},
		{"size without unit", hook("    limits:\n      memory: 512\n"), 7, "hooks.h.limits.memory", "expected a size like 512MiB"},
		{"bad unit", hook("    limits:\n      memory: 512MB\n"), 7, "hooks.h.limits.memory", "invalid size"},
		{"negative size", hook("    limits:\n      tmp: -1MiB\n"), 7, "hooks.h.limits.tmp", "invalid size"},
		{"tiny memory", hook("    limits:\n      memory: 1MiB\n"), 7, "hooks.h.limits.memory", "below the least a jail can run with (32MiB)"},
		{"pids string", hook("    limits:\n      pids: many\n"), 7, "hooks.h.limits.pids", "expected a whole number"},
		{"pids float", hook("    limits:\n      pids: 2.5\n"), 7, "hooks.h.limits.pids", "expected a whole number"},
		{"pids zero", hook("    limits:\n      pids: 0\n"), 7, "hooks.h.limits.pids", "below the least"},
		{"cpu string", hook("    limits:\n      cpu: lots\n"), 7, "hooks.h.limits.cpu", "expected a number of CPUs"},
		{"cpu huge", hook("    limits:\n      cpu: 5000\n"), 7, "hooks.h.limits.cpu", "surely a mistake"},
		{"huge size", hook("    limits:\n      memory: 99999999999TiB\n"), 7, "hooks.h.limits.memory", "too large"},
		{"limits list", hook("    limits: [1]\n"), 6, "hooks.h.limits", "expected a mapping of limits"},
		{"duplicated", hook("    limits:\n      pids: 20\n      pids: 30\n"), 8, "hooks.h.limits.pids", "duplicated key"},
		{"grace too long", hook("    kill_grace: 10m\n"), 6, "hooks.h.kill_grace", "at most 1m0s"},
		{"grace number", hook("    kill_grace: 5\n"), 6, "hooks.h.kill_grace", "expected a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest(mfTestFile, []byte(tt.src))
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *ManifestError", err)
			}
			if me.Line != tt.line || me.Key != tt.key || !strings.Contains(me.Problem, tt.prob) {
				t.Errorf("got %d %q %q\nwant %d %q ~%q", me.Line, me.Key, me.Problem, tt.line, tt.key, tt.prob)
			}
		})
	}
}

func TestCheckCeiling(t *testing.T) {
	src := mfOKHead + "hooks:\n  a: {run: [x]}\n  b:\n    run: [x]\n    limits:\n      pids: 100\n      memory: 3GiB\n"
	m, err := ParseManifest(mfTestFile, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = CheckCeiling(m, DefaultCeiling)
	want := "/m/module.yaml:9: hooks.b.limits.memory: 3GiB is above the operator's ceiling of 2GiB (config.yaml limits.memory); lower it, or ask the operator to raise the ceiling"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	if err := CheckCeiling(m, Resources{Memory: 4 << 30, Pids: 100, CPU: 1, Tmp: 1 << 20, RunDir: 1 << 20}); err != nil {
		t.Errorf("at the ceiling: %v", err)
	}
}

func TestParseFormatSize(t *testing.T) {
	for s, want := range map[string]int64{"512MiB": 512 << 20, "1GiB": 1 << 30, "64KiB": 64 << 10, "10B": 10, " 2TiB ": 2 << 40} {
		got, err := ParseSize(s)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "1.5GiB", "+1MiB", "1 GB", "0x10MiB", "1e3MiB"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
	for n, want := range map[int64]string{512 << 20: "512MiB", 1 << 30: "1GiB", 1536 << 20: "1536MiB", 1000: "1000B"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
