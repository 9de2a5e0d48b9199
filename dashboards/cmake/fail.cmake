# Fails with MESSAGE: stands in for a required tool that configure could not find.
message(FATAL_ERROR "${MESSAGE}")
