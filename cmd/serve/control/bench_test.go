package control

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// BenchmarkFacadeCall puts a facade call over the control socket beside
// the same call in-process, and beside its floor: a raw Unix socket
// ping-pong of one JSON line each way, as big as the call's own reply.
//
//	go test ./cmd/serve/control/ -run '^$' -bench FacadeCall -benchtime 2s
func BenchmarkFacadeCall(b *testing.B) {
	e, _ := served(b)
	c := attach(b, e.DataDir())
	me := engine.LocalActor()
	for i := range 20 { // receipts to list
		if err := e.SetConfig(me, "bench", fmt.Sprintf("key%d", i), "value"); err != nil {
			b.Fatal(err)
		}
	}
	calls := []struct {
		name  string
		call  func(f engine.Facade) error
		reply func(e *engine.Engine) (int, error) // its reply line's length
	}{
		{"Requests", func(f engine.Facade) error { _, err := f.Requests(engine.RequestFilter{All: true}); return err },
			func(e *engine.Engine) (int, error) {
				rs, err := e.Requests(engine.RequestFilter{All: true})
				return replyLen(rs), err
			}},
		{"Receipts10", func(f engine.Facade) error { _, err := f.Receipts(engine.ReceiptFilter{Limit: 10}); return err },
			func(e *engine.Engine) (int, error) {
				rs, err := e.Receipts(engine.ReceiptFilter{Limit: 10})
				return replyLen(rs), err
			}},
	}
	for _, cl := range calls {
		b.Run(cl.name+"/in-process", func(b *testing.B) {
			for b.Loop() {
				if err := cl.call(e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(cl.name+"/control-socket", func(b *testing.B) {
			for b.Loop() {
				if err := cl.call(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The floors: a raw round trip with a reply as big as each call's.
	for _, cl := range calls {
		line, err := cl.reply(e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%s/raw-unix-pingpong-%dB", cl.name, line), func(b *testing.B) { pingPong(b, line) })
	}
}

func replyLen(v any) int {
	b, _ := json.Marshal(v)
	return len(`{"op":"reply","id":1,"results":[]}`) + len(b) + 1
}

// pingPong is the floor under any call over a Unix socket: a 64-byte
// line out, a size-byte line back, no decoding.
func pingPong(b *testing.B, size int) {
	path := filepath.Join(b.TempDir(), "pp.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	answer := make([]byte, size)
	for i := range answer {
		answer[i] = 'x'
	}
	answer[size-1] = '\n'
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		for {
			if _, err := r.ReadBytes('\n'); err != nil {
				return
			}
			nc.Write(answer)
		}
	}()
	nc, err := net.Dial("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, size+1)
	ask := []byte(`{"op":"call","id":1,"method":"Receipts","args":[{"Limit":10}]}` + "\n")
	for b.Loop() {
		nc.Write(ask)
		if _, err := r.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
}
