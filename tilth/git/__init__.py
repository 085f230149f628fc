"""Every pygit2 and git-CLI call, commit messages and trailers."""
