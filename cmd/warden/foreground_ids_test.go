package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/perms"
)

// requestsFacade answers Requests with a fixed list; the rest of the
// facade is not called by backgroundConfirm.
type requestsFacade struct {
	engine.Facade
	reqs []engine.Request
}

func (f requestsFacade) Requests(engine.RequestFilter) ([]engine.Request, error) { return f.reqs, nil }

// A background run's network question names its real request: it
// printed "? the hook asks (request ID):" and "warden perms approve ID",
// while the confirm question of the same run had its number.
func TestBackgroundQuestionNamesItsRequest(t *testing.T) {
	confirm, _ := json.Marshal(map[string]string{"message": "Store it?"})
	connect, _ := json.Marshal(perms.Connect{Host: "example.com", Port: 443})
	f := requestsFacade{reqs: []engine.Request{
		{ID: 6, Operation: perms.OpConfirm, Content: confirm, Requester: engine.Requester{Run: "r1"}},
		{ID: 7, Operation: perms.OpConnect, Content: connect, Requester: engine.Requester{Run: "r1"}},
	}}
	var run atomic.Value
	run.Store("r1")
	for _, tc := range []struct{ msg, id string }{
		{"Allow vault/store to connect to example.com:443 (request 7)?", "7"},
		{"Store it?", "6"},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		backgroundConfirm(f, &out, &run)(ctx, tc.msg)
		got := out.String()
		if !strings.Contains(got, "? the hook asks (request "+tc.id+"):") || !strings.Contains(got, "warden perms approve "+tc.id+"`") || strings.Contains(got, " ID") {
			t.Errorf("background question %q:\n%s", tc.msg, got)
		}
	}
}
