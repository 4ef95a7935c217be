// Package approvaltest holds, in an API server of its own, the tests that remove or change the
// cluster-wide admission policies approvals rest on: run beside the other packages' tests, they
// would take those policies away from them.
package approvaltest
