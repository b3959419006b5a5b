package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Holder is what the lock file says of the command holding it.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// Lock is a held lock of a state directory.
type Lock struct{ file *os.File }

// Lock takes the state directory's lock for command, or refuses at once, naming the command that
// holds it. The lock is the kernel's (flock): a command killed, however, leaves none behind.
func (d Dir) Lock(command string) (*Lock, error) {
	if err := os.MkdirAll(d.Path, dirMode); err != nil {
		return nil, fmt.Errorf("create %s: %w", d.Path, err)
	}
	f, err := os.OpenFile(d.file(lockFile), os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("open the lock of standalone cluster %s: %w", d.Environment, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			var h Holder
			data, _ := os.ReadFile(d.file(lockFile))
			if json.Unmarshal(data, &h) == nil && h.PID != 0 {
				return nil, fmt.Errorf("standalone cluster %s is being changed by another command (`%s`, pid %d, since %s): wait for it to finish, or stop it and run yours again", d.Environment, h.Command, h.PID, h.Since.Local().Format(time.TimeOnly))
			}
			return nil, fmt.Errorf("standalone cluster %s is being changed by another command: wait for it to finish", d.Environment)
		}
		return nil, fmt.Errorf("lock standalone cluster %s: %w", d.Environment, err)
	}
	data, _ := json.Marshal(Holder{PID: os.Getpid(), Command: command, Since: time.Now()})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(data, '\n'), 0)
	}
	return &Lock{file: f}, nil
}

// Release releases the lock.
func (l *Lock) Release() {
	if l == nil || l.file == nil {
		return
	}
	_ = l.file.Truncate(0)
	_ = unix.Flock(int(l.file.Fd()), unix.LOCK_UN)
	_ = l.file.Close()
	l.file = nil
}
