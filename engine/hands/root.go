package hands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// RootError says a hands root was refused before anything was touched.
type RootError struct {
	Root    string
	Problem string
	Fix     string
	// Create, when set, says the only problem is a parent that does not
	// exist yet and that MakeParent may create it: these directories,
	// outermost first, with mode ParentMode, owned by UID (warden's
	// user). It is set only when every existing ancestor is a real
	// directory that only root or this user can write (no sticky
	// exception: a directory made in /tmp could be taken first by
	// another user), and the nearest one is this user's to write in.
	Create []string `json:",omitempty"`
	UID    int      `json:",omitempty"`
}

// ParentMode is the mode of the directories MakeParent creates.
const ParentMode fs.FileMode = 0o700

func (e *RootError) Error() string {
	return fmt.Sprintf("hands root %q %s; %s", e.Root, e.Problem, e.Fix)
}

// ValidateRoot holds a root that init is about to create to
// docs/operating.md: absolute, canonical, new, free of control characters and
// commas (a comma would split Docker's mount options), under ancestors
// that are real directories owned by root or the current user and not
// group- or world-writable (a root-owned sticky dir such as /tmp is fine:
// nobody else can rename our entries in it). It only looks.
func ValidateRoot(root string) error {
	bad := func(problem, fix string) error { return &RootError{Root: root, Problem: problem, Fix: fix} }
	switch {
	case root == "":
		return bad("is empty", "pass an absolute path that does not exist yet, e.g. --root $HOME/hands/task1")
	case hasControl(root):
		return bad("contains a control character", "pick a path of printable characters")
	case strings.Contains(root, ","):
		return bad("contains a comma (it would split Docker's mount options)", "pick a path without commas")
	case !filepath.IsAbs(root):
		return bad("is relative", "pass an absolute path, e.g. --root "+filepath.Join("$PWD", root))
	case filepath.Clean(root) != root:
		return bad("is not clean", "pass it as "+filepath.Clean(root))
	case root == "/":
		return bad("is the file system root", "pass a new directory below an existing one")
	case len(root) > 1024:
		return bad("is longer than 1024 bytes", "pick a shorter path")
	}
	if _, err := os.Lstat(root); err == nil {
		return bad("already exists", "warden never adopts an existing directory: pass a path that does not exist yet")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return bad("cannot be checked: "+err.Error(), "check the path and its parents")
	}
	parent := filepath.Dir(root)
	if real, err := filepath.EvalSymlinks(parent); errors.Is(err, fs.ErrNotExist) {
		return missingParent(root, parent)
	} else if err != nil {
		return bad("has a parent that cannot be resolved: "+errText(err), "create the parent first (mkdir -p "+parent+")")
	} else if real != parent {
		return bad("is not canonical: its parent resolves to "+real, "pass it as "+filepath.Join(real, filepath.Base(root)))
	}
	uid := os.Geteuid()
	for dir := parent; ; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if err != nil {
			return bad("has an ancestor "+dir+" that cannot be checked: "+errText(err), "check the path")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return bad("has a symlinked ancestor "+dir, "pass the real path")
		}
		if !fi.IsDir() {
			return bad("has an ancestor "+dir+" that is not a directory", "pick another path")
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != 0 && int(st.Uid) != uid {
			return bad(fmt.Sprintf("has an ancestor %s owned by uid %d (neither root nor you)", dir, st.Uid), "pick a path under directories owned by root or you")
		}
		perm := fi.Mode().Perm()
		if perm&0o022 != 0 && !(st.Uid == 0 && fi.Mode()&fs.ModeSticky != 0) {
			return bad(fmt.Sprintf("has an ancestor %s that is group- or world-writable (mode %04o)", dir, perm),
				"pick a path under directories only root or you can write, or `chmod go-w "+dir+"`")
		}
		if dir == "/" {
			return nil
		}
	}
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// missingParent is the refusal of a root whose parent does not exist
// yet: with the directories to create when MakeParent may create them,
// else with why not.
func missingParent(root, parent string) error {
	uid := os.Geteuid()
	mkdir := "create it first (mkdir -p " + parent + ")"
	var create []string
	top := parent
	for {
		_, err := os.Lstat(top)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return &RootError{Root: root, Problem: "has an ancestor " + top + " that cannot be checked: " + errText(err), Fix: "check the path"}
		}
		create = append([]string{top}, create...)
		top = filepath.Dir(top)
	}
	problem := "has a parent " + parent + " that does not exist yet"
	refuse := func(why string) error {
		return &RootError{Root: root, Problem: problem, Fix: mkdir + "; warden does not create it: " + why}
	}
	if real, err := filepath.EvalSymlinks(top); err != nil || real != top {
		return refuse(top + " is not its real path")
	}
	for dir := top; ; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return refuse(dir + " is not a directory")
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != 0 && int(st.Uid) != uid {
			return refuse(fmt.Sprintf("%s is owned by uid %d (neither root nor you)", dir, st.Uid))
		}
		if perm := fi.Mode().Perm(); perm&0o022 != 0 {
			if fi.Mode()&fs.ModeSticky != 0 {
				perm |= 0o1000
			}
			why := fmt.Sprintf("%s is group- or world-writable (mode %04o), and it creates a parent only where no ancestor is", dir, perm)
			if dir == top {
				why += ": another user could make " + create[0] + " first"
			}
			return refuse(why)
		}
		if dir == top && uid != 0 && int(st.Uid) != uid {
			return refuse(top + " is root's, and only root may create in it")
		}
		if dir == "/" {
			break
		}
	}
	return &RootError{Root: root, Problem: problem,
		Fix:    fmt.Sprintf("%s, or let the console's init wizard create it (mode %04o, owned by you)", mkdir, ParentMode),
		Create: create, UID: uid}
}

// MakeParent creates the missing parent of a new root when ValidateRoot
// says it may (RootError.Create): each directory with ParentMode, as
// this process's user. It returns the directories it made, and the root
// checked again; a root that is valid as it is is left alone.
func MakeParent(root string) ([]string, error) {
	var re *RootError
	if err := ValidateRoot(root); err == nil {
		return nil, nil
	} else if !errors.As(err, &re) || len(re.Create) == 0 {
		return nil, err
	}
	var made []string
	for _, dir := range re.Create {
		if err := os.Mkdir(dir, ParentMode); err != nil {
			return made, &RootError{Root: root, Problem: "has a parent that could not be created: " + err.Error(), Fix: "check the path"}
		}
		made = append(made, dir)
		// The umask may have taken bits off; nobody else can write
		// here, so the path still names what was made.
		if err := os.Chmod(dir, ParentMode); err != nil {
			return made, &RootError{Root: root, Problem: "has a parent whose mode could not be set: " + err.Error(), Fix: "chmod 0700 " + dir}
		}
	}
	return made, ValidateRoot(root)
}
