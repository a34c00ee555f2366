package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/runner"
)

// client talks HTTP to the node's model proxy on its unix socket.
type client struct {
	http    *http.Client
	timeout time.Duration // per request
	retries int           // 429s retried per request
	maxWait time.Duration // the longest Retry-After waited for
	logf    func(format string, args ...any)
	// lastRetryAfter is the last reply's Retry-After.
	lastRetryAfter time.Duration
}

// retry5xxWait is how long a runner waits before it tries a 5xx again.
const retry5xxWait = 500 * time.Millisecond

func newClient(socket string, f flags, logf func(string, ...any)) *client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &client{http: &http.Client{Transport: tr}, timeout: f.timeout, retries: f.retries, maxWait: f.maxWait, logf: logf}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// info asks the proxy which API it forwards to.
func (c *client) info(ctx context.Context) (model.API, error) {
	b, status, err := c.do(ctx, http.MethodGet, model.InfoPath, nil, nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		if msg := errorMessage(b); msg != "" {
			return "", runner.Failf("%s", msg)
		}
		return "", runner.Failf("the node's model proxy answered %s", http.StatusText(status))
	}
	var i model.Info
	if err := json.Unmarshal(b, &i); err != nil || i.API == "" {
		return "", runner.Failf("the node's model proxy's answer to %s is malformed", model.InfoPath)
	}
	return i.API, nil
}

// post sends body to path and returns the reply's body: a 429 is tried
// again after its Retry-After (at most retries times, each wait at most
// maxWait), a 5xx once after a short wait; any other status but 200 is a
// failure naming it.
func (c *client) post(ctx context.Context, path string, header func(http.Header), body []byte) ([]byte, error) {
	limited, failed := 0, 0
	for {
		b, status, err := c.do(ctx, http.MethodPost, path, header, body)
		if err != nil {
			return nil, err
		}
		var wait time.Duration
		switch {
		case status == http.StatusOK:
			return b, nil
		case status == http.StatusTooManyRequests:
			limited++
			if limited > c.retries {
				return nil, runner.Failf("the model's API still refused with 429 Too Many Requests after %d tries", limited)
			}
			wait = c.lastRetryAfter
			if wait > c.maxWait {
				return nil, runner.Failf("the model's API asks to wait %s (429 Retry-After), longer than this runner waits (%s)", wait, c.maxWait)
			}
		case status >= 500:
			failed++
			if failed > 1 {
				return nil, runner.Failf("the model's API answered %d %s twice%s", status, http.StatusText(status), saying(b))
			}
			wait = retry5xxWait
		default:
			return nil, runner.Failf("the model's API refused the request with %d %s%s", status, http.StatusText(status), saying(b))
		}
		c.logf("the model's API answered %d %s; trying again in %s", status, http.StatusText(status), wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// saying is an error body's message, for a failure note.
func saying(b []byte) string {
	if msg := errorMessage(b); msg != "" {
		return ": " + msg
	}
	return ""
}

// do makes one request within the per-request timeout. A 429's
// Retry-After is kept in lastRetryAfter.
func (c *client) do(ctx context.Context, method, path string, header func(http.Header), body []byte) ([]byte, int, error) {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, "http://model"+path, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if header != nil {
		header(req.Header)
	}
	resp, err := c.http.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, model.MaxBodyLen+1))
		if err == nil {
			if len(b) > model.MaxBodyLen {
				return nil, 0, runner.Failf("the model's reply is longer than %d bytes", model.MaxBodyLen)
			}
			c.lastRetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
			return b, resp.StatusCode, nil
		}
	}
	switch {
	case errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, 0, runner.Failf("the model did not answer within %s", c.timeout)
	case ctx.Err() != nil:
		return nil, 0, ctx.Err()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return nil, 0, runner.Failf("the node's model proxy is not there (%v)", op.Err)
	}
	return nil, 0, runner.Failf("the model's proxy: %v", err)
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; 1s when
// it says nothing readable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d.Round(time.Second)
		}
		return 0
	}
	return time.Second
}
