"""What single commands show: compare's verdicts, worst, causes, check, scan, bisect, sweep
and history, each a module its command imports when it runs."""
