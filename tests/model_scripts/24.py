# request: Ask the critic to grade the answer "The project is a shop back office" to the question "What is this project?".
result = await critic(question="What is this project?", answer="The project is a shop back office")
result
