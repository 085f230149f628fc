"""`tilth serve`: a read-only live web dashboard of $TILTH_HOME (imported only by `cli/`)."""
