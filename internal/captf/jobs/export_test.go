package jobs

// SampleParams gives the external tests the Params the golden files are built from.
var SampleParams = params
