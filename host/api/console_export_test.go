package api

// NotAPI returns the registered routes that serve the console's files
// rather than the API, as "METHOD /path" with {param} for :param: the
// OpenAPI test leaves them out, as the document does.
func (s *Server) NotAPI() map[string]bool {
	m := map[string]bool{}
	for _, r := range s.table {
		if r.notAPI {
			m[r.method+" "+r.path] = true
		}
	}
	return m
}
