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
// A directory held by another process is a *dirInUseError naming it and
// its pid.
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
		inUse := &dirInUseError{dir: dir, path: path}
		if b, rerr := os.ReadFile(path); rerr == nil {
			inUse.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return nil, inUse
	}
	err = f.Truncate(0)
	if err == nil {
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

// dirInUseError is a data directory locked by another process: pid, read
// from its LOCK file (0 if unreadable).
type dirInUseError struct {
	dir, path string
	pid       int
}

func (e *dirInUseError) holder() string {
	if e.pid == 0 {
		return "another process"
	}
	return "process " + strconv.Itoa(e.pid)
}

func (e *dirInUseError) Error() string {
	return fmt.Sprintf("data dir %s is in use by %s (it holds %s); stop it, or give another --data-dir", e.dir, e.holder(), e.path)
}
