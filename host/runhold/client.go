package runhold

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host/unixhost"
)

// dialWait bounds the connection and the request of Type and Query.
const dialWait = 10 * time.Second

// Attach joins the holder on socket (`ocx attach`): the terminal's output,
// starting with the last of what it showed, is copied to out, and what is
// read from in is typed into the terminal, until detachKey is read
// (detached true; the key itself is not sent, and the run goes on) or the
// holder ends (detached false). size, when not zero, becomes the
// terminal's size. Attach does not wait for a read from in that is under
// way when the holder ends: the caller closes in, or exits.
func Attach(socket string, in io.Reader, out io.Writer, size unixhost.WindowSize) (detached bool, err error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return false, err
	}
	defer c.Close()
	req := "attach\n"
	if size.Rows > 0 && size.Cols > 0 {
		req = fmt.Sprintf("attach %d %d\n", size.Rows, size.Cols)
	}
	if _, err := io.WriteString(c, req); err != nil {
		return false, err
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, c)
		ended <- err
	}()
	detach := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			if i := bytes.IndexByte(buf[:n], detachKey); i >= 0 {
				c.Write(buf[:i])
				close(detach)
				return
			}
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return // in ended: keys end, and the output goes on

			}
		}
	}()
	select {
	case err := <-ended:
		return false, err
	case <-detach:
		c.Close()
		<-ended
		return true, nil
	}
}

// Type types line into the holder's terminal, as a delivery does.
func Type(socket, line string) error {
	ans, err := request(socket, "type "+line)
	if err != nil {
		return err
	}
	if ans != "ok" {
		return errors.New(strings.TrimPrefix(ans, "error: "))
	}
	return nil
}

// info is a holder's answer to status.
type info struct {
	PID     int `json:"pid"`     // the command's
	Clients int `json:"clients"` // attached
	Holder  int `json:"holder"`  // the holder's own
}

// Query asks the holder on socket for its command's PID, its clients and
// its own PID.
func Query(socket string) (info, error) {
	ans, err := request(socket, "status")
	if err != nil {
		return info{}, err
	}
	var i info
	if err := json.Unmarshal([]byte(ans), &i); err != nil {
		return info{}, fmt.Errorf("runhold: status: %s", ans)
	}
	return i, nil
}

func request(socket, line string) (string, error) {
	c, err := net.DialTimeout("unix", socket, dialWait)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(dialWait))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	ans, err := readLine(bufio.NewReader(c), maxRequest)
	if err != nil {
		return "", fmt.Errorf("runhold: %s: no answer: %w", socket, err)
	}
	return ans, nil
}
