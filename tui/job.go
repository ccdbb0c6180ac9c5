package tui

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// jobProgressMsg is a frame's worth of progress of a job, and its end.
type jobProgressMsg struct {
	id    int64
	steps [][2]string
	done  bool
}

// progressJob is an engine call that reports progress (a hands init or
// finish), run off the UI goroutine: Update never waits on the engine.
// Its steps reach Update a frame's worth at a time, as one
// jobProgressMsg (never a message per step); the last one says the call
// has returned.
type progressJob struct {
	id     int64
	ctx    context.Context
	cancel context.CancelCauseFunc
	wake   chan struct{}
	ended  chan struct{} // closed when the engine call has returned

	mu    sync.Mutex
	steps [][2]string
	read  int
	done  bool
	err   error
	keep  func() // stores the result in its model, on the UI goroutine
}

var jobIDs atomic.Int64

func newProgressJob(parent context.Context) *progressJob {
	ctx, cancel := context.WithCancelCause(parent)
	return &progressJob{id: jobIDs.Add(1), ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), ended: make(chan struct{})}
}

func (j *progressJob) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// run calls the engine in its own goroutine; call gets the job's context
// and its progress callback, and returns what to keep (run on the UI
// goroutine when Update takes the last message) and its error.
func (j *progressJob) run(call func(ctx context.Context, progress func(step, detail string)) (keep func(), err error)) {
	go func() {
		keep, err := call(j.ctx, j.push)
		j.end(keep, err)
	}()
}

// push is the engine's Progress callback.
func (j *progressJob) push(step, detail string) {
	j.mu.Lock()
	j.steps = append(j.steps, [2]string{step, detail})
	j.mu.Unlock()
	j.poke()
}

func (j *progressJob) end(keep func(), err error) {
	j.mu.Lock()
	j.done, j.err, j.keep = true, err, keep
	j.mu.Unlock()
	close(j.ended)
	j.poke()
}

// next waits for progress, gathers a frame's worth, and returns it as one
// message: never one message per step.
func (j *progressJob) next() tea.Cmd {
	return func() tea.Msg {
		<-j.wake
		j.mu.Lock()
		done := j.done
		j.mu.Unlock()
		if !done {
			time.Sleep(frame)
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		m := jobProgressMsg{id: j.id, steps: append([][2]string(nil), j.steps[j.read:]...), done: j.done}
		j.read = len(j.steps)
		return m
	}
}
