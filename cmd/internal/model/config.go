package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// API is the flavour of HTTP API the node's model speaks.
type API string

// The APIs the proxy and the native runner know.
const (
	// OpenAI is an OpenAI-compatible chat-completions API (ollama,
	// llama.cpp's server, vLLM, OpenAI): POST /v1/chat/completions, the key
	// as "Authorization: Bearer KEY".
	OpenAI API = "openai"
	// Anthropic is Anthropic's Messages API: POST /v1/messages, the key as
	// "x-api-key: KEY".
	Anthropic API = "anthropic"
)

// Path is the one endpoint of the API the proxy forwards.
func (a API) Path() string {
	if a == Anthropic {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// Config is AGENTS/model.json.
type Config struct {
	// API is openai or anthropic.
	API API `json:"api"`
	// BaseURL is where the API is: http or https, a host, maybe a path
	// prefix; API.Path is appended to it.
	BaseURL string `json:"base_url"`
	// KeyFile is the absolute path of the file holding the key, "" for a
	// model that takes none (a local ollama).
	KeyFile string `json:"key_file,omitempty"`
}

// MaxConfigLen bounds model.json.
const MaxConfigLen = 64 << 10

// DecodeConfig reads model.json strictly: one JSON object of strings, a
// key it does not know refused by name, no key twice, api and base_url
// present, then Validate.
func DecodeConfig(b []byte) (*Config, error) {
	if len(b) > MaxConfigLen {
		return nil, fmt.Errorf("model.json: it is longer than %d bytes", MaxConfigLen)
	}
	if !utf8.Valid(b) {
		return nil, errors.New("model.json: it is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("model.json: it is not a JSON object")
	}
	got := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("model.json: it is not valid JSON: %v", err)
		}
		key, _ := tok.(string)
		switch key {
		case "api", "base_url", "key_file":
		default:
			return nil, fmt.Errorf("model.json: %q is not a key it may hold (api, base_url, key_file)", key)
		}
		if _, dup := got[key]; dup {
			return nil, fmt.Errorf("model.json: %q appears twice", key)
		}
		if tok, err = dec.Token(); err != nil {
			return nil, fmt.Errorf("model.json: it is not valid JSON: %v", err)
		}
		s, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("model.json: %q must be a string", key)
		}
		got[key] = s
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("model.json: it is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("model.json: it holds more after its JSON object")
	}
	for _, k := range []string{"api", "base_url"} {
		if _, ok := got[k]; !ok {
			return nil, fmt.Errorf("model.json: %q is missing", k)
		}
	}
	if v, ok := got["key_file"]; ok && v == "" {
		return nil, errors.New(`model.json: "key_file" is empty; leave the key out instead`)
	}
	c := &Config{API: API(got["api"]), BaseURL: got["base_url"], KeyFile: got["key_file"]}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks the API, the base URL (http or https, a host, no user,
// query or fragment) and the key file's path (absolute, clean).
func (c *Config) Validate() error {
	switch c.API {
	case OpenAI, Anthropic:
	default:
		return fmt.Errorf("model.json: \"api\" is %q, not openai or anthropic", c.API)
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil:
		return fmt.Errorf("model.json: \"base_url\": %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("model.json: \"base_url\" %q is not an http or https URL", c.BaseURL)
	case u.Host == "":
		return fmt.Errorf("model.json: \"base_url\" %q names no host", c.BaseURL)
	case u.User != nil:
		return errors.New(`model.json: "base_url" holds a user or password; a key goes in key_file`)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(c.BaseURL, "?"):
		return fmt.Errorf("model.json: \"base_url\" %q has a query or fragment", c.BaseURL)
	}
	if c.KeyFile != "" && (!filepath.IsAbs(c.KeyFile) || filepath.Clean(c.KeyFile) != c.KeyFile) {
		return fmt.Errorf("model.json: \"key_file\" %q is not a clean absolute path", c.KeyFile)
	}
	return nil
}

// MaxKeyLen bounds a key file.
const MaxKeyLen = 16 << 10

// ReadKey reads the key file: its content without surrounding white
// space, one line, not empty. The error names the file, never the key. A
// key file below the agents root is read as every file there is (through
// no link, a regular file only); one elsewhere is the administrator's.
func ReadKey(l host.Layout, path string) (string, error) {
	var b []byte
	var err error
	if l.Contains(path) {
		b, err = unixhost.Below(l.Root()).ReadFile(path, MaxKeyLen)
	} else {
		b, err = readOutside(path)
	}
	if err != nil {
		return "", fmt.Errorf("the model's key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("the model's key: %s is empty", path)
	}
	if strings.ContainsAny(key, "\r\n") || !utf8.ValidString(key) {
		return "", fmt.Errorf("the model's key: %s holds more than one line", path)
	}
	return key, nil
}

// readOutside reads a key file outside the agents root, at most MaxKeyLen
// bytes.
func readOutside(path string) ([]byte, error) {
	f, err := os.Open(path) // trust:outside the administrator's key file, outside the agents root
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyLen+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxKeyLen {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, MaxKeyLen)
	}
	return b, nil
}
