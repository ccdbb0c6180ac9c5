package tui

import (
	"fmt"
	"strings"
	"time"
)

// maxMessages bounds the message log (the oldest go first).
const maxMessages = 1000

// message is one entry of the message log: every status-line error and
// notice, whole (the status line cuts it to one line of the width).
type message struct {
	at    time.Time
	text  string
	isErr bool
}

// note records a message in the log. The text is kept whole but made
// safe: hook- and module-controlled text reaches the log through error
// messages.
func (s *shared) note(text string, isErr bool) {
	if text == "" {
		return
	}
	s.messages = append(s.messages, message{at: s.now(), text: text, isErr: isErr})
	if n := len(s.messages) - maxMessages; n > 0 {
		s.messages = append(s.messages[:0:0], s.messages[n:]...)
	}
}

// messagesOverlay shows the message log, newest last (as a terminal
// would), scrolled to the end. `:messages` (the command line) and M open
// it.
func messagesOverlay(s *shared) *overlay {
	msgs := append([]message(nil), s.messages...)
	o := newOverlay(s, fmt.Sprintf("Messages (%d)", len(msgs)), func(w int) []string {
		if len(msgs) == 0 {
			return []string{s.th.Dim.Render("no messages yet: every error and notice of the status line is kept here, whole")}
		}
		var out []string
		for _, m := range msgs {
			head := m.at.Local().Format("15:04:05") + "  "
			if m.isErr {
				head += "error  "
			} else {
				head += "note   "
			}
			for i, l := range strings.Split(safe(m.text), "\n") {
				prefix := head
				if i > 0 {
					prefix = strings.Repeat(" ", textWidth(head))
				}
				rows := wrapRows(l, max(w-textWidth(head), 10), 0, 1<<20)
				if len(rows) == 0 {
					rows = []string{""}
				}
				for j, r := range rows {
					if j > 0 {
						prefix = strings.Repeat(" ", textWidth(head))
					}
					st := s.th.Dim
					if m.isErr {
						st = s.th.StatusErr
					}
					out = append(out, st.Render(prefix)+r)
				}
			}
		}
		return out
	})
	o.off = 1 << 30 // clamp puts it on the last page
	return o
}

// OpenMessages opens the message log over the frame (for the command
// line's :messages).
func (a *App) OpenMessages() { a.overlay = messagesOverlay(a.sh) }
