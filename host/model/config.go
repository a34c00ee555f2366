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
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
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

// Paths are the endpoints of the API the proxy forwards: Anthropic's
// Messages (Claude Code, the native runner), OpenAI's chat completions
// (the native runner) and Responses (Codex), each streamed or not.
func (a API) Paths() []string {
	if a == Anthropic {
		return []string{"/v1/messages"}
	}
	return []string{"/v1/chat/completions", "/v1/responses"}
}

// Endpoint is where one API is, and its key.
type Endpoint struct {
	// BaseURL is where the API is: http or https, a host, maybe a path
	// prefix; the endpoint's path is appended to it.
	BaseURL string `json:"base_url"`
	// KeyFile is the absolute path of the file holding the key, "" for a
	// model that takes none (a local ollama).
	KeyFile string `json:"key_file,omitempty"`
	// Models are the models the node offers on this API, the first its
	// default (D52): create gives a record naming none the first, and
	// refuses one naming another. None listed: create offers none.
	Models []string `json:"models,omitempty"`
}

// Config is AGENTS/model.json, in one of two forms: one API (api,
// base_url, key_file), or an endpoint per API, each with its own key
// (anthropic, openai), so that Claude Code and Codex both reach theirs.
type Config struct {
	// API, BaseURL, KeyFile and Models are the one-API form.
	API     API      `json:"api,omitempty"`
	BaseURL string   `json:"base_url,omitempty"`
	KeyFile string   `json:"key_file,omitempty"`
	Models  []string `json:"models,omitempty"`
	// Anthropic and OpenAI are the per-API form.
	Anthropic *Endpoint `json:"anthropic,omitempty"`
	OpenAI    *Endpoint `json:"openai,omitempty"`
}

// Endpoints are the APIs c serves, each with its endpoint.
func (c *Config) Endpoints() map[API]Endpoint {
	out := map[API]Endpoint{}
	if c.API != "" {
		out[c.API] = Endpoint{BaseURL: c.BaseURL, KeyFile: c.KeyFile, Models: c.Models}
	}
	if c.Anthropic != nil {
		out[Anthropic] = *c.Anthropic
	}
	if c.OpenAI != nil {
		out[OpenAI] = *c.OpenAI
	}
	return out
}

// Primary is the API the native runner speaks (the proxy's Info): the
// one-API form's, else openai when it is named, else anthropic.
func (c *Config) Primary() API {
	switch {
	case c.API != "":
		return c.API
	case c.OpenAI != nil:
		return OpenAI
	}
	return Anthropic
}

// maxConfigLen bounds model.json.
const maxConfigLen = 64 << 10

// DecodeConfig reads model.json strictly: one JSON object, a key it does
// not know refused by name, no key twice; the one-API form's keys are
// strings, api and base_url present; the per-API form's are objects of
// base_url and key_file; the two forms never mixed. Then Validate.
func DecodeConfig(b []byte) (*Config, error) {
	if len(b) > maxConfigLen {
		return nil, fmt.Errorf("model.json: it is longer than %d bytes", maxConfigLen)
	}
	if !utf8.Valid(b) {
		return nil, errors.New("model.json: it is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	top, err := strictObject(dec, "model.json", []string{"api", "base_url", "key_file", "models", "anthropic", "openai"})
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("model.json: it holds more after its JSON object")
	}
	c := &Config{}
	_, one := top["api"]
	_, perAnthropic := top["anthropic"]
	_, perOpenAI := top["openai"]
	per := perAnthropic || perOpenAI
	switch {
	case one && per:
		return nil, errors.New(`model.json: it names its API both ways: either "api", "base_url" and "key_file", or an object per API ("anthropic", "openai")`)
	case per:
		for k := range top {
			if k != "anthropic" && k != "openai" {
				return nil, fmt.Errorf(`model.json: %q belongs to the one-API form; with an object per API, each names its own base_url and key_file`, k)
			}
		}
		for name, dst := range map[string]**Endpoint{"anthropic": &c.Anthropic, "openai": &c.OpenAI} {
			raw, ok := top[name]
			if !ok {
				continue
			}
			e, err := decodeEndpoint(raw, "model.json: "+strconv.Quote(name))
			if err != nil {
				return nil, err
			}
			*dst = e
		}
	default:
		got := map[string]string{}
		for k, raw := range top {
			if k == "models" {
				if c.Models, err = decodeModels(raw, "model.json"); err != nil {
					return nil, err
				}
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nil, fmt.Errorf("model.json: %q must be a string", k)
			}
			got[k] = s
		}
		for _, k := range []string{"api", "base_url"} {
			if _, ok := got[k]; !ok {
				return nil, fmt.Errorf("model.json: %q is missing", k)
			}
		}
		if v, ok := got["key_file"]; ok && v == "" {
			return nil, errors.New(`model.json: "key_file" is empty; leave the key out instead`)
		}
		c.API, c.BaseURL, c.KeyFile = API(got["api"]), got["base_url"], got["key_file"]
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeEndpoint reads one API's object: base_url (required), key_file.
func decodeEndpoint(raw json.RawMessage, where string) (*Endpoint, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	fields, err := strictObject(dec, where, []string{"base_url", "key_file", "models"})
	if err != nil {
		return nil, err
	}
	e := &Endpoint{}
	for k, v := range fields {
		if k == "models" {
			if e.Models, err = decodeModels(v, where); err != nil {
				return nil, err
			}
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, fmt.Errorf("%s: %q must be a string", where, k)
		}
		if k == "base_url" {
			e.BaseURL = s
		} else if s == "" {
			return nil, fmt.Errorf(`%s: "key_file" is empty; leave the key out instead`, where)
		} else {
			e.KeyFile = s
		}
	}
	if _, ok := fields["base_url"]; !ok {
		return nil, fmt.Errorf(`%s: "base_url" is missing`, where)
	}
	return e, nil
}

// maxModels bounds how many models one API of model.json lists.
const maxModels = 64

// decodeModels reads an API's models: a list of model names, each one line
// of at most 200 bytes, none twice, at most MaxModels.
func decodeModels(raw json.RawMessage, where string) ([]string, error) {
	var ms []string
	if json.Unmarshal(raw, &ms) != nil || ms == nil {
		return nil, fmt.Errorf(`%s: "models" must be a list of model names`, where)
	}
	if len(ms) > maxModels {
		return nil, fmt.Errorf(`%s: "models" lists more than %d models`, where, maxModels)
	}
	for i, m := range ms {
		switch {
		case m == "":
			return nil, fmt.Errorf(`%s: "models"[%d] is empty`, where, i)
		case len(m) > 200 || strings.ContainsFunc(m, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return nil, fmt.Errorf(`%s: "models"[%d] is not a model name: one line of at most 200 bytes`, where, i)
		case slices.Contains(ms[:i], m):
			return nil, fmt.Errorf(`%s: "models": %q appears twice`, where, m)
		}
	}
	return ms, nil
}

// strictObject reads one JSON object from dec: each key one of known,
// none twice, the values kept raw.
func strictObject(dec *json.Decoder, where string, known []string) (map[string]json.RawMessage, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%s: it is not a JSON object", where)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: it is not valid JSON: %v", where, err)
		}
		key, _ := tok.(string)
		if !slices.Contains(known, key) {
			return nil, fmt.Errorf("%s: %q is not a key it may hold (%s)", where, key, strings.Join(known, ", "))
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s: %q appears twice", where, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: it is not valid JSON: %v", where, err)
		}
		out[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: it is not valid JSON: %v", where, err)
	}
	return out, nil
}

// Validate checks each API, its base URL (http or https, a host, no user,
// query or fragment) and its key file's path (absolute, clean).
func (c *Config) Validate() error {
	if c.API != "" && (c.Anthropic != nil || c.OpenAI != nil) {
		return errors.New("model.json: it names its API both ways")
	}
	switch c.API {
	case OpenAI, Anthropic, "":
	default:
		return fmt.Errorf("model.json: \"api\" is %q, not openai or anthropic", c.API)
	}
	eps := c.Endpoints()
	if len(eps) == 0 {
		return errors.New("model.json: it names no API")
	}
	for api, e := range eps {
		where := "model.json"
		if c.API == "" {
			where += ": " + strconv.Quote(string(api))
		}
		if err := e.validate(where); err != nil {
			return err
		}
	}
	return nil
}

func (e Endpoint) validate(where string) error {
	u, err := url.Parse(e.BaseURL)
	switch {
	case err != nil:
		return fmt.Errorf("%s: \"base_url\": %v", where, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s: \"base_url\" %q is not an http or https URL", where, e.BaseURL)
	case u.Host == "":
		return fmt.Errorf("%s: \"base_url\" %q names no host", where, e.BaseURL)
	case u.User != nil:
		return fmt.Errorf(`%s: "base_url" holds a user or password; a key goes in key_file`, where)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(e.BaseURL, "?"):
		return fmt.Errorf("%s: \"base_url\" %q has a query or fragment", where, e.BaseURL)
	}
	if e.KeyFile != "" && (!filepath.IsAbs(e.KeyFile) || filepath.Clean(e.KeyFile) != e.KeyFile) {
		return fmt.Errorf("%s: \"key_file\" %q is not a clean absolute path", where, e.KeyFile)
	}
	return nil
}

// maxKeyLen bounds a key file.
const maxKeyLen = 16 << 10

// readKey reads the key file: its content without surrounding white
// space, one line, not empty. The error names the file, never the key. A
// key file below the agents root is read as every file there is (through
// no link, a regular file only); one elsewhere is the administrator's.
func readKey(l host.Layout, path string) (string, error) {
	var b []byte
	var err error
	if l.Contains(path) {
		b, err = unixhost.Below(l.Root()).ReadFile(path, maxKeyLen)
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
	b, err := io.ReadAll(io.LimitReader(f, maxKeyLen+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyLen {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, maxKeyLen)
	}
	return b, nil
}

// RunnerAPI is the API a runner speaks to the node's model (D48, D52):
// claude Anthropic's, codex OpenAI's (Responses), native c's primary.
func (c *Config) RunnerAPI(runner string) API {
	switch runner {
	case messages.RunnerClaude:
		return Anthropic
	case messages.RunnerCodex:
		return OpenAI
	}
	return c.Primary()
}

// DefaultNetwork is create's default for whether a record's sandbox
// shares the host's network (D79). Seed 001 E8 makes it true "because both
// runners reach their own service"; on a node that serves a runner's
// model they reach it through model.sock, which needs no network, and a
// sandbox with the host's network has the host's loopback, every user's.
// So false for the native runner (it speaks to model.sock alone) and for
// claude and codex where model.json names the API they speak; true for
// those two on a node that serves them no model, where each reaches its
// own service with its own login.
func DefaultNetwork(c *Config, runner string) bool {
	if runner == messages.RunnerNative {
		return false
	}
	if c == nil {
		return true
	}
	_, served := c.Endpoints()[c.RunnerAPI(runner)]
	return !served
}

// ChooseModel is the model create gives a record's session (D52): with no
// model.json (c nil) the node serves no model, so the record's own, which
// the CLI's own login serves, and none is refused; otherwise the model
// must be one model.json lists for the API runner speaks, and a record
// naming none takes that API's first. A refusal names the model and what
// the node offers.
func ChooseModel(c *Config, runner, asked string) (string, error) {
	if c == nil {
		if asked == "" {
			return "", fmt.Errorf("the record names none, and this node has no model.json naming one for runner %s: name the model", runner)
		}
		return asked, nil
	}
	api := c.RunnerAPI(runner)
	e, ok := c.Endpoints()[api]
	if !ok {
		return "", fmt.Errorf("runner %s speaks the %s API, which this node's model.json does not name", runner, api)
	}
	if asked == "" {
		if len(e.Models) == 0 {
			return "", fmt.Errorf("the record names none, and this node's model.json lists no models for the %s API, which runner %s speaks: list them in its \"models\"", api, runner)
		}
		return e.Models[0], nil
	}
	if slices.Contains(e.Models, asked) {
		return asked, nil
	}
	offers := "its model.json lists none"
	if len(e.Models) > 0 {
		q := make([]string, len(e.Models))
		for i, m := range e.Models {
			q[i] = strconv.Quote(m)
		}
		offers = "it offers " + strings.Join(q, ", ")
	}
	return "", fmt.Errorf("%q is not a model this node offers for runner %s (the %s API): %s", asked, runner, api, offers)
}
