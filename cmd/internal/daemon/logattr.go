package daemon

import (
	"log/slog"

	"github.com/ocx-go/ocx/actors"
)

// errAttr is the log attribute of an error (actors.KeyError); none for nil.
func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String(actors.KeyError, err.Error())
}
