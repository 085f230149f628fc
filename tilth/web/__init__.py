"""`tilth serve`: the live web dashboard of $TILTH_HOME a person reads and acts from (what a person does
there goes through `actions/`); imported only by `cli/`."""
