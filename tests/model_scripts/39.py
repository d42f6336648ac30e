# request: Ask the drafter for an onboarding checklist and the editor to add a title to it.
checklist = await drafter(
    task="Write an onboarding checklist for a new developer joining our Python shop back-office project: "
    "accounts and access, setting up the environment, reading the code (cli, orders, order parser, inventory, utils), "
    "running it, and first tasks."
)
titled = await editor(draft=checklist, feedback="add a title")
titled
