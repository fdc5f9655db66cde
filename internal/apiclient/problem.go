package apiclient

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Problem turns an answer that is not a success into an error: the status
// and the problem document's detail, with each field error on a line of its
// own, or the status alone when the body is no problem document.
func Problem(resp *http.Response, body []byte) error {
	var problem ErrorModel
	if json.Unmarshal(body, &problem) == nil && problem.Detail != nil {
		msg := *problem.Detail
		if problem.Errors != nil {
			for _, e := range *problem.Errors {
				if e.Message != nil {
					loc := ""
					if e.Location != nil {
						loc = *e.Location + ": "
					}
					msg += "\n  " + loc + *e.Message
				}
			}
		}
		return fmt.Errorf("%s: %s", resp.Status, msg)
	}
	return fmt.Errorf("%s", resp.Status)
}
