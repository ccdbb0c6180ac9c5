package hookkit

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// How a hook reaches its broker, for both kinds of connection (Client's
// pollable one and SendLog's blocking one).

// engineEnv is where the engine is, as dialEnv reads it: the socket
// path, or the dialer descriptor under landlock, and the token.
func engineEnv() (sock, dialer, tok string, err error) {
	sock, dialer, tok = os.Getenv("WARDEN_SOCKET"), os.Getenv("WARDEN_DIALER"), os.Getenv("WARDEN_TOKEN")
	if sock == "" && dialer == "" || tok == "" {
		return "", "", "", ErrNoEngine
	}
	return sock, dialer, tok, nil
}

// connectEngine returns a blocking stream socket connected to the run's
// broker: through the dialer descriptor when there is one (landlock),
// else to the socket path. before, if set, is applied to the socket
// before it connects (the dialer's end: before it is returned).
func connectEngine(sock, dialer string, before func(fd int) error) (int, error) {
	if dialer != "" {
		dfd, err := strconv.Atoi(dialer)
		if err != nil || dfd < 3 {
			return -1, fmt.Errorf("hookkit: WARDEN_DIALER=%q is not a descriptor", dialer)
		}
		fd, err := socketpairThrough(dfd)
		if err != nil {
			return -1, err
		}
		if before != nil {
			if err := before(fd); err != nil {
				syscall.Close(fd)
				return -1, fmt.Errorf("hookkit: connect to the engine: %w", err)
			}
		}
		return fd, nil
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("hookkit: connect to the engine at %s: %w", sock, os.NewSyscallError("socket", err))
	}
	if before != nil {
		if err := before(fd); err != nil {
			syscall.Close(fd)
			return -1, fmt.Errorf("hookkit: connect to the engine: %w", err)
		}
	}
	if err := connectRetrying(fd, sock); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("hookkit: connect to the engine at %s: %w", sock, os.NewSyscallError("connect", err))
	}
	return fd, nil
}

func connectRetrying(fd int, path string) error {
	for {
		err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			return err
		}
	}
}

// socketpairThrough makes a blocking stream socketpair, sends one end to
// the broker's dialer at fd (SCM_RIGHTS) and returns the other.
func socketpairThrough(fd int) (int, error) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("hookkit: connect to the engine: socketpair: %w", err)
	}
	err = syscall.Sendmsg(fd, []byte{0}, syscall.UnixRights(pair[1]), nil, 0)
	syscall.Close(pair[1])
	if err != nil {
		syscall.Close(pair[0])
		return -1, fmt.Errorf("hookkit: connect to the engine through its dialer (fd %d): %w", fd, err)
	}
	return pair[0], nil
}
