package dashboard

// ViewTitles are the titles of every page the dashboard renders (each
// view's <title> starts with one), for tests that must visit them all.
func ViewTitles() []string {
	out := make([]string, 0, len(views))
	for _, v := range views {
		out = append(out, v.title)
	}
	return out
}
