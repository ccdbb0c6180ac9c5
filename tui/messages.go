package tui

// note records a message in the message log without showing it in the
// status line (a toast, say): :messages and M show them all, whole.
func (s *shared) note(text string, isErr bool) {
	if text == "" {
		return
	}
	s.messages = append(s.messages, message{at: s.now(), text: text, err: isErr})
	if len(s.messages) > maxMessages {
		s.messages = append([]message(nil), s.messages[len(s.messages)-maxMessages/2:]...)
	}
}

// OpenMessages opens the message log over the frame (M; :messages is the
// command line's way to it).
func (a *App) OpenMessages() { a.overlay = a.messagesOverlay() }
