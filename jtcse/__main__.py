from jtcse.cli import main

main()
