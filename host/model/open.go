package model

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// ReadConfig reads and decodes the node's model.json
// (host.Layout.ModelJSON), below the agents root through the bounded
// reader: nil and no error when the node has none (it serves no model).
func ReadConfig(l host.Layout) (*Config, error) {
	b, err := unixhost.Below(l.Root()).ReadFile(l.ModelJSON(), maxConfigLen)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeConfig(b)
}

// Open reads the node's model configuration (host.Layout.ModelJSON) and
// its key, and returns the proxy to serve on the model socket of a session
// whose definition names the model only (NewProxy).
// ok is false when the node has no model.json: it serves no model. A
// model.json that does not read, a key file that lies inside a workspace
// (where a sandbox could read it) or that does not read gives the
// Refusing handler, which tells every runner why, and the error, for the
// server's log.
func Open(l host.Layout, only string, log *slog.Logger) (h http.Handler, ok bool, err error) {
	c, err := ReadConfig(l)
	if c == nil && err == nil {
		return nil, false, nil
	}
	keys := map[API]string{}
	if err == nil {
		for api, e := range c.Endpoints() {
			if e.KeyFile == "" {
				continue
			}
			if _, in := l.KeyWithin(e.KeyFile); in {
				err = fmt.Errorf("model.json: the key file %s of %s lies in a workspace, which its session's sandbox sees; keep the key outside every workspace", e.KeyFile, api)
				break
			}
			if keys[api], err = readKey(l, e.KeyFile); err != nil {
				break
			}
		}
	}
	if err == nil {
		h, err = NewProxy(c, keys, only, log)
	}
	if err != nil {
		return Refusing(fmt.Errorf("the node's model configuration: %w", err)), true, err
	}
	return h, true, nil
}
