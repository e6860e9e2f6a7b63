package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes the data directory for this process: an exclusive flock on
// <dir>/LOCK, which holds our pid. The kernel releases the lock when the
// process ends, however it ends, so a killed run never leaves a stale lock.
// A directory held by another process is an error naming it and its pid.
func lockDir(dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
		}
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("data dir %s is in use by %s (it holds %s); stop it, or give another --data-dir", dir, holder, path)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	return func() error {
		// The pid stays in the file: the lock is the flock, not the file.
		return f.Close()
	}, nil
}
