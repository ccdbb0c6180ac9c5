package engine

import (
	"testing"

	"github.com/wardenhq/warden/engine/jail/cgroup"
)

// Doctor names one reason once, with every controller it holds for.
func TestJoinReasons(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"memory: /x is not writable", "pids: /x is not writable", "cpu: /x is not writable", "systemd: no user session"},
			"memory, pids, cpu: /x is not writable; systemd: no user session"},
		{[]string{"memory: the memory controller is not delegated to /d", "pids: the pids controller is not delegated to /d"},
			"memory: the memory controller is not delegated to /d; pids: the pids controller is not delegated to /d"},
		{[]string{"cgroup v1 unusable: why"}, "cgroup v1 unusable: why"},
		{nil, ""},
	} {
		if got := cgroup.JoinReasons(tc.in); got != tc.want {
			t.Errorf("cgroup.JoinReasons(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
