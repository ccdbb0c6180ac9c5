// Command gohello is an example hook written with hookkit, the Go SDK of
// the warden hook protocol. It reads its input and config, keeps a little
// state in its secrets, asks the operator, and returns a typed output.
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

func main() {
	if err := run(); err != nil {
		// stderr lines show up in the run's stream as warnings; a nonzero
		// exit fails the run.
		fmt.Fprintln(os.Stderr, "gohello:", err)
		os.Exit(1)
	}
}

func run() error {
	c, err := hookkit.Connect() // WARDEN_SOCKET and WARDEN_TOKEN
	if err != nil {
		return err
	}
	defer c.Close()

	// The context carries the inputs, typed as the manifest declares.
	ctx := c.Context()
	question, _ := ctx.Inputs["question"].(string)
	c.Logf("run %s: %s/%s asked %q", ctx.Run, ctx.Module, ctx.Hook, question)

	// Config may be unset; the answer starts from a sensible base.
	base := 42
	s, ok, err := c.Config().Get("answer_base")
	if err != nil {
		return err
	}
	if ok {
		if n, err := strconv.Atoi(s); err == nil {
			base = n
		} else {
			c.Log("warn", fmt.Sprintf("config answer_base %q is not a number; using %d", s, base))
		}
	}

	// Secrets writes in a transaction land all together or not at all.
	prev, _, err := c.Secrets().Get("last_answer")
	if err != nil {
		return err
	}
	answer := base + len(question)
	if err := c.Secrets().Tx().Set("last_answer", strconv.Itoa(answer)).Commit(); err != nil {
		return err
	}
	if prev != "" {
		c.Log("debug", "the previous answer was "+prev)
	}

	// Ask the operator; the hook's idle clock is paused while it waits.
	ok, err = c.Confirm(fmt.Sprintf("Reveal the answer to %q?", question))
	if err != nil {
		return err
	}
	if !ok {
		c.Log("warn", "the operator would rather not know; answering 0")
		answer = 0
	} else {
		c.Log("success", fmt.Sprintf("the answer is %d", answer))
	}

	// The declared outputs; the engine checks names and types.
	return c.Result(map[string]any{"answer": answer})
}
