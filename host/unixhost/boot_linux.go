package unixhost

import (
	"fmt"
	"os"
	"time"

	"github.com/ocx-go/ocx/host"
)

// BootTime is when the host booted, from /proc/stat.
func BootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, fmt.Errorf("read the boot time: %w", err)
	}
	t, err := host.ParseBootTime(b)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the boot time from /proc/stat: %w", err)
	}
	return t, nil
}
