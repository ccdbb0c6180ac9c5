package storage

import "syscall"

const noFollow = syscall.O_NOFOLLOW
