package sitemap

import (
	"net/url"
	"strings"
)

// Allowed reports whether the sitemap at sitemapURL may list loc, by the
// protocol's host rule (sitemaps.org, "Sitemap file location" and "Sitemaps
// & Cross Submits"): loc must be on the sitemap's host, or on the host of
// the robots.txt that referenced the sitemap (robotsURL: the robots.txt that
// led to it, directly or through sitemap indexes; nil if none). It applies
// to a urlset's pages and to an index's child sitemaps alike.
//
// Parse does not apply it, because only the caller knows where a document
// came from; a crawler calls it for every entry and counts what it refuses.
// Hosts are compared case-insensitively, without a trailing dot, a
// scheme's default port left out. Two deliberate departures from the
// letter of the protocol: the scheme is not compared (a site that moved to
// https often lists http URLs, and one host serves both), and the path rule
// (a sitemap in /catalog/ lists only /catalog/ URLs) is not applied, since
// the sitemaps a crawler reads come from a robots.txt at the host's root,
// which vouches for the whole host.
func Allowed(loc, sitemapURL, robotsURL *url.URL) bool {
	if loc == nil || sitemapURL == nil {
		return false
	}
	h := hostPort(loc)
	if h == "" {
		return false
	}
	return h == hostPort(sitemapURL) || (robotsURL != nil && h == hostPort(robotsURL))
}

// hostPort returns u's host, lowercased and without a trailing dot, and its
// port unless it is the scheme's default.
func hostPort(u *url.URL) string {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return ""
	}
	switch port := u.Port(); {
	case port == "", port == "80" && strings.EqualFold(u.Scheme, "http"), port == "443" && strings.EqualFold(u.Scheme, "https"):
		return host
	default:
		return host + ":" + port
	}
}
