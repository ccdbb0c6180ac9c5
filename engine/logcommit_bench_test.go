package engine

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// logCalls is the hook scenario "log-calls N MS [stdout]": N one-shot
// log calls (hookkit.SendLog, what `warden hook log MSG` sends: a
// connection each), "call 0" to "call N-1", MS milliseconds apart; N 0
// for calls until one fails (the engine is gone). With stdout, the same
// lines are printed instead.
func logCalls(args []string) int {
	if len(args) < 2 {
		say("usage: log-calls N MS [stdout]")
		return 2
	}
	n, _ := strconv.Atoi(args[0])
	ms, _ := strconv.Atoi(args[1])
	stdout := len(args) > 2 && args[2] == "stdout"
	for i := 0; n == 0 || i < n; i++ {
		if stdout {
			fmt.Printf("call %d\n", i)
		} else if err := hookkit.SendLog("info", fmt.Sprintf("call %d", i)); err != nil {
			if n == 0 {
				return 0
			}
			say("log call %d: %v", i, err)
			return 1
		}
		if ms > 0 {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
	}
	return 0
}

// BenchmarkLogCallCommits counts the commits (each one two fdatasyncs)
// that a run's 200 stream lines cost: as 200 one-shot log calls 5 ms
// apart (a shell hook's `warden hook log` calls come about that far
// apart, each a process start), beside the same lines on stdout 5 ms
// apart and back to back, and the log calls back to back. Each run of
// the hook is about a second:
//
//	go test ./engine/ -run '^$' -bench LogCallCommits -benchtime 3x
func BenchmarkLogCallCommits(b *testing.B) {
	kinds := []struct{ name, args string }{
		{"log-5ms", `"200", "5"`},
		{"stdout-5ms", `"200", "5", stdout`},
		{"log-0ms", `"200", "0"`},
		{"stdout-0ms", `"200", "0", stdout`},
	}
	hooks := map[string]string{}
	for _, k := range kinds {
		hooks[k.name] = fmt.Sprintf("    run: [./hook.sh, log-calls, %s]\n", k.args)
	}
	e := openEngine(b, Options{})
	if _, err := e.AddModule(testActor, testModule(b, hooks)); err != nil {
		b.Fatal(err)
	}
	commits := make([]int, len(kinds))
	for b.Loop() {
		for i, k := range kinds {
			sub := e.bus.subscribe(1 << 16)
			o := runScript(b, e, k.name)
			evs, missed := drain(b, sub)
			sub.Close()
			if missed {
				b.Fatal("the subscriber missed events: the count would be short")
			}
			for _, ev := range evs {
				if ev.Kind == EventLines && ev.Lines.Run == o.Run.ID {
					commits[i]++
				}
			}
		}
	}
	for i, k := range kinds {
		b.ReportMetric(float64(commits[i])/float64(b.N), k.name+"-commits/run")
	}
}
