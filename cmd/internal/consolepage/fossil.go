package consolepage

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
)

// Fossil is what Fossil says of a request to its CGI extension
// (fossil-2.21.md §5): it clears the environment and sets only these.
type Fossil struct {
	// Viewer is the login Fossil authenticated (FOSSIL_USER); "" for a
	// visitor who has not logged in.
	Viewer string
	// Caps are the viewer's capability letters (FOSSIL_CAPABILITIES),
	// nobody's and anonymous's included.
	Caps string
	// Nonce is FOSSIL_NONCE, new on every request: the one script a page
	// runs under Fossil's Content-Security-Policy carries it.
	Nonce string
	// Repository is the repository file Fossil serves (FOSSIL_REPOSITORY).
	Repository string
	// Base is the repository's URL as the browser sees it:
	// REQUEST_SCHEME://HTTP_HOST followed by FOSSIL_URI (Fossil's g.zTop).
	Base string
	// Script is the extension's own path below the repository (SCRIPT_NAME
	// less FOSSIL_URI, /ext/console), and Path what follows it (PATH_INFO).
	Script, Path string
	// Cookie is the viewer's login cookie (NAME=VALUE) from HTTP_COOKIE,
	// the one named for this repository's project code; "" when none.
	Cookie string
}

// fossilFromEnv reads the request's Fossil side from the CGI environment.
// A request with no FOSSIL_REPOSITORY did not come from Fossil.
func fossilFromEnv(getenv func(string) string) (Fossil, error) {
	f := Fossil{
		Viewer:     getenv("FOSSIL_USER"),
		Caps:       getenv("FOSSIL_CAPABILITIES"),
		Nonce:      getenv("FOSSIL_NONCE"),
		Repository: getenv("FOSSIL_REPOSITORY"),
		Path:       getenv("PATH_INFO"),
	}
	if f.Repository == "" {
		return Fossil{}, fmt.Errorf("console: no FOSSIL_REPOSITORY: the console runs as Fossil's CGI extension (fossil server --extroot DIR), not on its own")
	}
	scheme := getenv("REQUEST_SCHEME")
	if scheme == "" {
		scheme = "http"
		if getenv("HTTPS") == "on" {
			scheme = "https"
		}
	}
	top := getenv("FOSSIL_URI")
	f.Base = scheme + "://" + getenv("HTTP_HOST") + top
	f.Script = strings.TrimPrefix(getenv("SCRIPT_NAME"), top)
	return f, nil
}

// MayRead says whether the viewer may see the pages: read (o), or admin
// (a) or setup (s), which imply it.
func (f Fossil) MayRead() bool { return strings.ContainsAny(f.Caps, "oas") }

// Admin says whether the viewer may press the buttons: admin or setup
// (D7: only their notes count).
func (f Fossil) Admin() bool { return f.Viewer != "" && strings.ContainsAny(f.Caps, "as") }

// loginCookie finds the viewer's login cookie for the project whose code
// starts with code16 among the request's cookies: Fossil names it
// fossil-CODE16 (src/login.c login_cookie_name).
func loginCookie(r *http.Request, code16 string) string {
	want := "fossil-" + code16
	for _, c := range r.Cookies() {
		if c.Name == want && c.Value != "" {
			cookie := c.Name + "=" + c.Value
			if _, err := fossilio.CookieLogin(cookie); err == nil {
				return cookie
			}
		}
	}
	return ""
}
