// Package version says which build a program is: its version and the
// check-in it was built from, both set at link time (-ldflags -X, as `make
// build` and `ocx release stage` do), and the one line every program prints
// when asked (`ocx version`, `ocxd --version`, `workspace --version`).
package version

import (
	"fmt"
	"strings"
	"time"
)

// Dev is what an unstamped build says for both: built by plain `go build`.
const Dev = "dev"

// Version and Checkin are stamped at link time:
//
//	-X github.com/ocx-go/ocx/host/version.Version=v0.0.0-20261201100000-3f2a9c000000
//	-X github.com/ocx-go/ocx/host/version.Checkin=3f2a9c...
//
// They are variables only so that the linker can set them; nothing else
// does.
var (
	Version = Dev
	Checkin = Dev
)

// Package is this package's import path, which -X names.
const Package = "github.com/ocx-go/ocx/host/version"

// LDFlags is the -ldflags value that stamps version and checkin.
func LDFlags(version, checkin string) string {
	return "-X " + Package + ".Version=" + version + " -X " + Package + ".Checkin=" + checkin
}

// Info is what a version line says.
type Info struct {
	Program string // ocx, ocxd, workspace
	Version string
	Checkin string
}

// Stamped says whether the build was stamped with a check-in.
func (i Info) Stamped() bool { return i.Checkin != Dev }

// String is the version line, without its newline:
//
//	PROGRAM version VERSION checkin CHECKIN
//
// five words separated by one space, none of them empty or holding a space.
func (i Info) String() string {
	return i.Program + " version " + i.Version + " checkin " + i.Checkin
}

// Of is this build's Info for program.
func Of(program string) Info { return Info{Program: program, Version: Version, Checkin: Checkin} }

// Line is this build's version line for program, with its newline.
func Line(program string) string { return Of(program).String() + "\n" }

// Parse reads a version line (one trailing newline allowed). Anything but
// exactly the five words is refused, saying what was read.
func Parse(line string) (Info, error) {
	l := strings.TrimSuffix(line, "\n")
	f := strings.Split(l, " ")
	if len(f) != 5 || f[1] != "version" || f[3] != "checkin" || f[0] == "" || f[2] == "" || f[4] == "" || strings.ContainsAny(l, "\t\r\n") {
		return Info{}, fmt.Errorf("%q is not a version line (PROGRAM version VERSION checkin CHECKIN)", short(l))
	}
	return Info{Program: f[0], Version: f[2], Checkin: f[4]}, nil
}

func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// Pseudo is the version a build of checkin made at when is stamped with, in
// the shape of Go's pseudo-versions: v0.0.0-YYYYMMDDHHMMSS-HASH12 (UTC), so
// that two versions sort as their check-ins' times do.
func Pseudo(when time.Time, checkin string) string {
	h := checkin
	if len(h) > 12 {
		h = h[:12]
	}
	return "v0.0.0-" + when.UTC().Format("20060102150405") + "-" + h
}
