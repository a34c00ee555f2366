package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
)

// SandboxOf is what the node records of the sandbox of its child id
// (host.SandboxRecord, D45): bwrap's init by the PID bwrap reports on its
// status pipe, that init's start time, and the PID namespace bwrap says
// it made, checked against the init's own and its parent against id. It
// waits up to wait for bwrap to report.
func (l *Launcher) SandboxOf(id protocol.ProcID, wait time.Duration) (host.SandboxRecord, error) {
	l.mu.Lock()
	c, ok := l.kids[id.PID]
	l.mu.Unlock()
	if !ok || c.id != id || !c.sandboxed || !c.own {
		return host.SandboxRecord{}, fmt.Errorf("unixhost: sandbox of %s: not a sandboxed child of this launcher", id)
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	deadline := time.Now().Add(wait)
	for {
		c.readStatus()
		if st := host.ParseBwrapStatus(c.statusBuf); st.ChildPID > 0 {
			return sandboxRecord(id, st)
		}
		left := time.Until(deadline)
		if c.status < 0 || left <= 0 {
			return host.SandboxRecord{}, fmt.Errorf("unixhost: sandbox of %s: bwrap reported no child within %s", id, wait)
		}
		pfd := []unix.PollFd{{Fd: int32(c.status), Events: unix.POLLIN}}
		unix.Poll(pfd, int(min(left, 50*time.Millisecond)/time.Millisecond)+1)
	}
}

// sandboxRecord checks what bwrap reported against the init itself.
func sandboxRecord(bwrap protocol.ProcID, st host.BwrapStatus) (host.SandboxRecord, error) {
	rec := host.SandboxRecord{Bwrap: bwrap, PIDNamespace: st.PIDNamespace}
	if st.PIDNamespace == 0 {
		return rec, fmt.Errorf("unixhost: sandbox of %s: bwrap reported no PID namespace", bwrap)
	}
	s, err := ReadStat(st.ChildPID)
	if err != nil {
		return rec, fmt.Errorf("unixhost: sandbox of %s: its init %d: %w", bwrap, st.ChildPID, err)
	}
	if s.PPID != bwrap.PID {
		return rec, fmt.Errorf("unixhost: sandbox of %s: process %d is not bwrap's child", bwrap, st.ChildPID)
	}
	link, err := readlinkAt(unix.AT_FDCWD, fmt.Sprintf("/proc/%d/ns/pid", st.ChildPID))
	if err != nil {
		return rec, fmt.Errorf("unixhost: sandbox of %s: the PID namespace of its init %d: %w", bwrap, st.ChildPID, err)
	}
	if ns, err := host.ParseNSLink(link, "pid"); err != nil || ns != st.PIDNamespace {
		return rec, fmt.Errorf("unixhost: sandbox of %s: its init %d runs in %s, not the pid:[%d] bwrap reported", bwrap, st.ChildPID, link, st.PIDNamespace)
	}
	rec.Init = protocol.ProcID{PID: st.ChildPID, Start: s.Start}
	return rec, rec.Validate()
}

// WriteSandboxRecord keeps rec as the sandbox of workspace ws
// (Workspace.Sandbox, in the node's own Held directory), atomically.
func WriteSandboxRecord(root *Root, ws host.Workspace, rec host.SandboxRecord) error {
	b, err := rec.Encode()
	if err != nil {
		return err
	}
	if err := root.MkdirAll(ws.Held, 0o700); err != nil {
		return err
	}
	return root.WriteFile(ws.Sandbox, b, 0o600)
}

// ForgetSandbox removes the sandbox record of ws when it names bwrap and
// its init is gone: what the reaper does once bwrap has ended. A record
// whose init still runs (bwrap was killed, the sandbox goes on, orphaned)
// stays, so that what runs in that sandbox still counts for ws; a record
// of another bwrap (a later session's) is left alone.
func ForgetSandbox(root *Root, ws host.Workspace, bwrap protocol.ProcID) error {
	b, err := root.ReadFile(ws.Sandbox, SmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := host.DecodeSandboxRecord(b)
	if err == nil && rec.Bwrap != bwrap {
		return nil
	}
	if err == nil && initAlive(rec) {
		return nil
	}
	return root.Remove(ws.Sandbox)
}

// initAlive says whether the record's init still runs, with its start
// time, in the record's PID namespace.
func initAlive(rec host.SandboxRecord) bool {
	st, err := ReadStat(rec.Init.PID)
	if err != nil || st.Start != rec.Init.Start || st.Zombie() {
		return false
	}
	link, err := readlinkAt(unix.AT_FDCWD, fmt.Sprintf("/proc/%d/ns/pid", rec.Init.PID))
	if err != nil {
		return false
	}
	ns, err := host.ParseNSLink(link, "pid")
	return err == nil && ns == rec.PIDNamespace
}
