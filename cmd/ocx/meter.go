package main

import (
	"flag"
	"os"
	"strconv"

	"github.com/ocx-go/ocx/host"
)

// meterFlags are what the model proxy's count needs (D50): the launch the
// session serves and its limits.tokens. The daemon gives them to `mcp
// start` in its environment (host.MCPLaunchEnv, host.MCPTokensEnv), which
// passes them to serve as flags.
type meterFlags struct {
	launch *string
	tokens *uint64
}

func addMeterFlags(fs *flag.FlagSet) meterFlags {
	return meterFlags{
		launch: fs.String("launch", os.Getenv(host.MCPLaunchEnv), "the launch the session serves, for its model's count (default $"+host.MCPLaunchEnv+")"),
		tokens: fs.Uint64("tokens", envUint(host.MCPTokensEnv), "the session's limits.tokens: its model proxy refuses its requests once its count reaches it (default $"+host.MCPTokensEnv+"; 0: none)"),
	}
}

func envUint(k string) uint64 {
	n, _ := strconv.ParseUint(os.Getenv(k), 10, 64)
	return n
}

// args are the flags start passes serve.
func (f meterFlags) args() []string {
	var a []string
	if *f.launch != "" {
		a = append(a, "--launch", *f.launch)
	}
	if *f.tokens > 0 {
		a = append(a, "--tokens", strconv.FormatUint(*f.tokens, 10))
	}
	return a
}
