from rtlab.cli import main

main()
