package hands

import "errors"

// FixError is a failure that knows what the operator should do about it.
// Problem and Fix are kept apart so that a view can list the fix as a
// next step without taking the message apart; Error reads
// "problem; fix". Err is the cause, when there is one (its text is
// already in Problem); errors.Is and errors.As see it.
type FixError struct {
	Problem string
	Fix     string
	Err     error
}

func (e *FixError) Error() string { return e.Problem + "; " + e.Fix }

func (e *FixError) Unwrap() error { return e.Err }

// Fixes lists what to do about err, outermost first: the Fix of every
// *FixError, *RootError and *ReceiptError in its chain (through wrapping
// and joined errors), each once.
func Fixes(err error) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		fix := ""
		switch e := err.(type) {
		case *FixError:
			fix = e.Fix
		case *RootError:
			fix = e.Fix
		case *ReceiptError:
			fix = e.Fix
		}
		if fix != "" && !seen[fix] {
			seen[fix] = true
			out = append(out, fix)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return out
}
